#!/usr/bin/env bash
# tcp.sh - tcp: endpoints: one pagepipe listens (-i tcp:HOST:PORT) and
# writes a file, another connects to it (-o tcp:HOST:PORT); the bytes
# arrive intact.  A connection refused is an error (exit 1).
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

begin tcp_ipv6_loopback
if ! grep -q '^0*1 ' /proc/net/if_inet6 2>/dev/null; then
	skip_case "no IPv6 loopback here"
else
	rm -f "$T/got"
	if listen "[::1]" -o "$T/got"; then
		pp -i "$T/in1" -o "tcp:[::1]:$PORT" 2>"$E"
		want_status $? 0
		listener_done
		want_same "$T/in1" "$T/got"
	fi
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
