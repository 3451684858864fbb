#!/usr/bin/env bash
# tcp.sh - tcp: endpoints: one pagepipe listens (-i tcp:HOST:PORT) and
# writes a file, another connects to it (-o tcp:HOST:PORT); the bytes
# arrive intact.  A connection refused is an error (exit 1); a bad port a
# usage error (exit 2).  Listening on all addresses takes IPv6 clients too;
# on port 0, the port chosen is printed.
. "$(dirname "$0")/lib.sh"

MiB=1048576
gen_random "$T/in1" $((MiB + 3))
gen_random "$T/in20" $((20 * MiB + 1))

# listen HOSTPART OUT...: start a listener pagepipe on a free port
# ("-i tcp:HOSTPART:PORT", pagepipe arguments OUT... after it); sets LPID
# and PORT.  Retries with another port when the bind fails.
listen() {
	local host=$1 try t0
	shift
	for try in 1 2 3 4 5 6 7 8; do
		PORT=$(free_port)
		"$PAGEPIPE" -i "tcp:$host:$PORT" "$@" 2>"$T/listener.err" </dev/null &
		LPID=$!
		bg_track $LPID
		t0=$(now_ms)
		while running $LPID && [ $(($(now_ms) - t0)) -lt 10000 ]; do
			listening "$PORT" && return 0
			sleep 0.02
		done
		kill -KILL $LPID 2>/dev/null
		wait $LPID 2>/dev/null
	done
	bad "no listener came up (last: $(head -c 200 "$T/listener.err"))"
	return 1
}
# listener_done: wait for the listener; its status must be 0.
listener_done() {
	wait_pid "$LPID" 20
	[ "$WAIT_RC" -eq 0 ] || bad "listener exit status $WAIT_RC: $(head -c 200 "$T/listener.err")"
	cat "$T/listener.err" >>"$E"
}

begin tcp_loopback_1M
rm -f "$T/got"
if listen 127.0.0.1 -o "$T/got"; then
	pp -i "$T/in1" -o "tcp:127.0.0.1:$PORT" 2>"$E"
	want_status $? 0
	listener_done
	want_same "$T/in1" "$T/got"
	want_empty "$E" stderr
fi
end

begin tcp_loopback_20M_plus_file_output
rm -f "$T/got" "$T/o2"
if listen 127.0.0.1 -o "$T/got"; then
	cat "$T/in20" | pp -o "$T/o2" -o "tcp:127.0.0.1:$PORT" 2>"$E"
	want_status "${PIPESTATUS[1]}" 0
	listener_done
	want_same "$T/in20" "$T/got"
	want_same "$T/in20" "$T/o2"
	want_empty "$E" stderr
fi
end

begin tcp_listener_to_stdout_and_file
rm -f "$T/got" "$T/o2"
if listen 127.0.0.1 -o - -o "$T/got" >"$T/o2"; then
	pp -i "$T/in1" -o "tcp:127.0.0.1:$PORT" 2>"$E"
	want_status $? 0
	listener_done
	want_same "$T/in1" "$T/got"
	want_same "$T/in1" "$T/o2"
fi
end

begin tcp_empty_input
rm -f "$T/got"
if listen 127.0.0.1 -o "$T/got"; then
	pp -o "tcp:127.0.0.1:$PORT" </dev/null 2>"$E"
	want_status $? 0
	listener_done
	[ "$(fsize "$T/got")" -eq 0 ] || bad "listener wrote $(fsize "$T/got") bytes, want 0"
fi
end

begin tcp_listen_all_addresses
rm -f "$T/got"
if listen "" -o "$T/got"; then
	pp -i "$T/in1" -o "tcp:127.0.0.1:$PORT" 2>"$E"
	want_status $? 0
	listener_done
	want_same "$T/in1" "$T/got"
fi
end

# An IPv6 client, to a listener on [::1] and to one on all addresses
# (which must take IPv6 too, not IPv4 only).
for where in ipv6_loopback listen_all_addresses_ipv6_client; do
	begin "tcp_$where"
	if ! grep -q '^0*1 ' /proc/net/if_inet6 2>/dev/null; then
		skip_case "no IPv6 loopback here"
		continue
	fi
	host="[::1]"
	[ $where = ipv6_loopback ] || host=""
	rm -f "$T/got"
	if listen "$host" -o "$T/got"; then
		pp -i "$T/in1" -o "tcp:[::1]:$PORT" 2>"$E"
		want_status $? 0
		listener_done
		want_same "$T/in1" "$T/got"
	fi
	end
done

# Port 0: the kernel picks a port, and pagepipe says which.
begin tcp_listen_port_0_says_which
rm -f "$T/got"
"$PAGEPIPE" -i tcp::0 -o "$T/got" 2>"$T/listener.err" </dev/null &
LPID=$!
bg_track $LPID
t0=$(now_ms)
until grep -q 'listening on port' "$T/listener.err" || ! running $LPID ||
	[ $(($(now_ms) - t0)) -ge 10000 ]; do
	sleep 0.02
done
want_grep '^pagepipe: listening on port [1-9][0-9]*$' "$T/listener.err" "listener stderr"
PORT=$(sed -n 's/^pagepipe: listening on port \([0-9]*\)$/\1/p' "$T/listener.err")
if [ -n "$PORT" ]; then
	listening "$PORT" || bad "nothing listens on the port printed, $PORT"
	pp -i "$T/in1" -o "tcp:127.0.0.1:$PORT" 2>"$E"
	want_status $? 0
	listener_done
	want_same "$T/in1" "$T/got"
	[ "$(grep -c . "$T/listener.err")" -eq 1 ] || bad "listener said more: $(head -c 200 "$T/listener.err")"
fi
end

# Ports out of range or not a number nor a service: usage errors (getaddrinfo
# took 99999 as 34463), before anything is opened or connected.
bad_port() {
	local name=$1 dir=$2 spec=$3
	begin "tcp_bad_port_$name"
	rm -f "$T/never"
	if [ "$dir" = in ]; then
		pp -i "$spec" -o "$T/never" </dev/null >"$T/out" 2>"$E"
	else
		pp -o "$T/never" -o "$spec" </dev/null >"$T/out" 2>"$E"
	fi
	want_status $? 2
	[ "$(head -n 1 "$E" | cut -c1-$((12 + ${#spec})))" = "pagepipe: $spec: " ] ||
		bad "first stderr line does not name $spec: $(head -n 1 "$E")"
	[ "$(tail -n 1 "$E")" = "Try 'pagepipe --help' for more information." ] ||
		bad "last stderr line: $(tail -n 1 "$E")"
	[ ! -e "$T/never" ] || bad "an output was created despite the usage error"
	end
}
bad_port out_99999 out tcp:127.0.0.1:99999
bad_port out_65536 out tcp:127.0.0.1:65536
bad_port out_0 out tcp:127.0.0.1:0
bad_port out_negative out tcp:127.0.0.1:-1
bad_port out_unknown_service out tcp:127.0.0.1:no-such-service-pp
bad_port out_empty out tcp:127.0.0.1:
bad_port out_no_host out tcp::9000
bad_port out_ipv6_unclosed out 'tcp:[::1:9000'
bad_port in_99999 in tcp::99999
bad_port in_huge in tcp:127.0.0.1:100000000000000000000
bad_port in_hex in tcp::0x50

begin tcp_service_name_accepted
if ! getent services discard >/dev/null 2>&1; then
	skip_case "no 'discard' service in the services database"
else
	pp -i "$T/in1" -o tcp:127.0.0.1:discard 2>"$E"
	rc=$?
	[ $rc -ne 2 ] || bad "a known service name was a usage error"
	want_prefixed "$E"
	end
fi

begin tcp_connect_refused
port=$(free_port)
pp -i "$T/in1" -o "tcp:127.0.0.1:$port" 2>"$E" >"$T/o1"
want_status $? 1
want_grep "^pagepipe: .*$port.*: Connection refused\$" "$E" stderr
want_prefixed "$E"
want_empty "$T/o1" "standard output"
end

begin tcp_connect_refused_with_other_output
port=$(free_port)
pp -i "$T/in1" -o "$T/o2" -o "tcp:127.0.0.1:$port" 2>"$E"
want_status $? 1
want_grep "Connection refused" "$E" stderr
end

begin tcp_listen_port_in_use
rm -f "$T/got"
if listen 127.0.0.1 -o "$T/got"; then
	pp -i "tcp:127.0.0.1:$PORT" -o "$T/o2" 2>"$E" </dev/null
	want_status $? 1
	want_grep "^pagepipe: .*Address already in use\$" "$E" stderr
	E2=$E; E=$T/err.sender
	pp -i "$T/in1" -o "tcp:127.0.0.1:$PORT" 2>"$E"
	[ $? -eq 0 ] || bad "sender to the first listener failed"
	E=$E2
	listener_done
	want_same "$T/in1" "$T/got"
fi
end

finish
