# leaves_lib.bash - the matrix of an output that goes away while the others
# go on, shared by output_leaves*.sh (split so that each script stays well
# under test/run.sh's time limit, also under a sanitizer): every way an
# output leaves (its reader exits, its reader is killed, /dev/full, a full
# file system, a tcp reset) x the buffer full or not when it leaves x every
# --output-error mode, over the data paths each script names.  In each cell
# the surviving outputs get every byte (or a prefix, under the exit modes,
# which stop at once), the output that left got a prefix, the exit status
# and the messages are the documented ones, and the run ends within a time
# limit (a dropped output once kept its pages, so the input waited for room
# for ever: issue 14, defect 1).  Sourced after lib.sh.

KiB=1024
MiB=1048576
in=$T/in
gen_random "$in" $((4 * MiB + 123))
insize=$(fsize "$in")
N=$((64 * KiB + 7)) # what a leaving reader takes before it goes
RUN_LIMIT=15        # seconds a run may take once the output has left

# A tmpfs of 192 KiB for the full file system (needs mount: root).
mnt=$T/mnt
mkdir -p "$mnt"
have_tmpfs=0
mount -t tmpfs -o size=192k tmpfs "$mnt" 2>/dev/null && have_tmpfs=1
trap '[ $have_tmpfs = 1 ] && umount "$mnt" 2>/dev/null; _cleanup' EXIT

# The tcp reader that resets: takes N bytes, waits for the gate, then
# closes with SO_LINGER 0 (a RST).  Prints its port into PORTFILE.
cat >"$T/rst_sink.pl" <<'EOF'
use strict;
use IO::Socket::INET;
use Socket qw(SOL_SOCKET SO_LINGER);
my ($portfile, $n, $gate, $got) = @ARGV;
use Socket qw(SO_RCVBUF);
my $l = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1', LocalPort => 0,
                              ReuseAddr => 1) or die "listen: $!";
setsockopt($l, SOL_SOCKET, SO_RCVBUF, 16384); # so that a stalled reader stalls the sender
open(my $pf, '>', "$portfile.tmp") or die; print $pf $l->sockport, "\n"; close $pf;
rename("$portfile.tmp", $portfile) or die;
my $c = $l->accept or die "accept: $!";
open(my $g, '>', $got) or die; binmode $g;
my $left = $n;
while ($left > 0) {
	my $r = sysread($c, my $buf, $left > 65536 ? 65536 : $left);
	last if !$r;
	print $g $buf;
	$left -= $r;
}
close $g;
select(undef, undef, undef, 0.01) until -e $gate;
setsockopt($c, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
close $c;
EOF

gate=$T/gate
gate_wait() { while [ ! -e "$gate" ]; do sleep 0.01; done; }

# start_leaver WAY FULL: start what reads the leaving output; sets LEAVE
# (its -o argument) and HELPERS (pids to wait for).  With FULL=full the
# reader stops after N bytes and leaves only at the gate; otherwise it
# leaves on its own.
start_leaver() {
	local way=$1 full=$2
	LEAVE=$T/lv
	rm -f "$T/lv" "$T/lv.got" "$T/port"
	case $way in
	head|kill9) mkfifo "$T/lv" ;;
	esac
	case $way.$full in
	head.full) { head -c $N >"$T/lv.got"; gate_wait; } <"$T/lv" & ;;
	head.*) head -c $N <"$T/lv" >"$T/lv.got" & ;;
	kill9.full) (head -c $N >"$T/lv.got"; exec sleep 1000) <"$T/lv" & ;;
	kill9.*) (head -c $N >"$T/lv.got"; kill -KILL $BASHPID) <"$T/lv" & ;;
	devfull.*) LEAVE=/dev/full ;;
	tmpfs.*) rm -f "$mnt"/*; LEAVE=$mnt/out ;;
	tcp.*)
		perl "$T/rst_sink.pl" "$T/port" $N "$gate" "$T/lv.got" &
		;;
	esac
	LEAVER_PID=""
	case $way in
	head|kill9|tcp) LEAVER_PID=$!; bg_track $!; HELPERS="$HELPERS $!" ;;
	esac
	if [ "$way" = tcp ]; then
		local t0
		t0=$(now_ms)
		while [ ! -s "$T/port" ] && [ $(($(now_ms) - t0)) -lt 10000 ]; do sleep 0.01; done
		LEAVE=tcp:127.0.0.1:$(cat "$T/port" 2>/dev/null)
	fi
}

# leave WAY FULL: make a leaver that waits at the gate leave now (the
# killed reader that does not wait kills itself once it has N bytes).
leave() {
	touch "$gate"
	[ "$1" = kill9 ] && [ "$2" = full ] && kill -KILL "$LEAVER_PID" 2>/dev/null
}

# wait_full PID: wait until pagepipe (input on its fd 0, a file) stopped
# reading, i.e. its buffer is full, or it ended; at most 10 s.
wait_full() {
	local pid=$1 pos last=-1 same=0 t0
	t0=$(now_ms)
	while running "$pid" && [ $(($(now_ms) - t0)) -lt 10000 ]; do
		pos=$(sed -n 's/^pos:[[:space:]]*//p' "/proc/$pid/fdinfo/0" 2>/dev/null)
		[ -n "$pos" ] || break
		if [ "$pos" = "$last" ] && [ "$pos" -gt 0 ]; then
			same=$((same + 1))
			[ $same -ge 4 ] && break
		else
			same=0
		fi
		last=$pos
		sleep 0.05
	done
	if running "$pid" && [ "${pos:-0}" -ge "$insize" ]; then
		bad "the buffer did not fill: all the input was read"
	fi
}

# The error a way of leaving gives: epipe, reset (ECONNRESET, or EPIPE when
# the reset came before the write) or nospc.
err_of() {
	case $1 in
	head|kill9) echo epipe ;;
	tcp) echo reset ;;
	*) echo nospc ;;
	esac
}

# run_case PATHNAME OPTS WAY FULL MODE SOLO: one cell of the matrix.
run_case() {
	local pname=$1 opts=$2 way=$3 full=$4 mode=$5 solo=$6
	local name="${pname}_${way}_${full}_${mode:-default}" pid rc outs=()
	begin "$name"
	rm -f "$gate" "$T/s1" "$T/s2" "$T/s2.got"
	HELPERS=""
	start_leaver "$way" "$full"
	[ "$full" = full ] || touch "$gate"
	if [ "$solo" != solo ]; then
		# Two survivors: a file, and a fifo whose reader (for the errors
		# that come at once, under FULL) waits at the gate, so that the
		# buffer fills behind it.
		mkfifo "$T/s2"
		if [ "$full" = full ] && [ "$(err_of "$way")" = nospc ]; then
			{ gate_wait; cat; } <"$T/s2" >"$T/s2.got" &
		else
			cat <"$T/s2" >"$T/s2.got" &
		fi
		bg_track $!
		HELPERS="$HELPERS $!"
		outs=(-o "$T/s1" -o "$T/s2")
	fi
	# shellcheck disable=SC2086
	env --default-signal=PIPE "$PAGEPIPE" $opts ${mode:+--output-error=$mode} --stats \
		-o "$LEAVE" "${outs[@]}" <"$in" >/dev/null 2>"$E" &
	pid=$!
	bg_track $pid
	if [ "$full" = full ]; then
		wait_full $pid
		leave "$way" "$full"
	else
		leave "$way" "$full"
	fi
	wait_pid $pid $RUN_LIMIT
	rc=$WAIT_RC
	[ "$rc" -ne 124 ] || bad "still running ${RUN_LIMIT} s after the output left (killed)"
	touch "$gate"
	[ "$way" = kill9 ] && kill -KILL "$LEAVER_PID" 2>/dev/null
	local h
	for h in $HELPERS; do
		wait_pid "$h" 10
	done
	check_case "$way" "$mode" "$rc" "$solo" "$pname"
	end
}

# check_case WAY MODE RC SOLO PATHNAME: the outcome the man page promises.
check_case() {
	local way=$1 mode=${2:-warn-nopipe} rc=$3 solo=$4 pname=$5 err msg epipe=0 stops=0
	err=$(err_of "$way")
	case $err in
	epipe) epipe=1; msg='Broken pipe' ;;
	nospc) msg='No space left on device' ;;
	reset)
		msg='(Connection reset by peer|Broken pipe)'
		grep -q 'Connection reset by peer' "$E" || epipe=1
		;;
	esac
	[ "$rc" -eq 124 ] && return
	# What the mode does with this error.
	local silent=0 want_rc=1
	case $mode in
	warn-nopipe) [ $epipe = 1 ] && silent=1 ;;
	warn) ;;
	exit) stops=1 ;;
	exit-nopipe) if [ $epipe = 1 ]; then silent=1; else stops=1; fi ;;
	esac
	[ $silent = 1 ] && want_rc=0
	want_status "$rc" $want_rc
	if [ $silent = 1 ]; then
		grep -v '^pagepipe: .*\(bytes (\|output [0-9]* (\)' "$E" >"$E.rest"
		want_empty "$E.rest" "stderr (besides --stats)"
	else
		want_grep "^pagepipe: [^ ]*: $msg\$" "$E" stderr
		if [ $stops = 1 ]; then
			want_grep "^pagepipe: [^ ]*: stopping after [0-9]+ bytes to it \(--output-error=$mode\)\$" "$E" stderr
		else
			want_grep "^pagepipe: [^ ]*: output dropped after [0-9]+ bytes\$" "$E" stderr
		fi
	fi
	want_prefixed "$E"
	# /dev/full is not a descriptor splice(2) takes: the buffer path.
	case $pname.$way in
	*.devfull) want_grep '^pagepipe: [0-9]+ bytes .*, through the buffer' "$E" "the --stats path" ;;
	kernel*) want_grep '^pagepipe: [0-9]+ bytes .*, by (tee|splice)\(2\)' "$E" "the --stats path" ;;
	*) want_grep '^pagepipe: [0-9]+ bytes .*, through the buffer' "$E" "the --stats path" ;;
	esac
	# A full buffer on the spill path is full spill files too: some output
	# spilled (unless an output that fails at its first write was alone or
	# stopped the run).
	if [ "${pname%_solo}" = spill ] && [ "$full" = full ] &&
		! { [ "$err" = nospc ] && [ "$solo$stops" != 0 ]; }; then
		want_grep '; spilled [0-9]+ bytes' "$E" "--stats (a spill)"
	fi
	# What each output got.
	[ -e "$T/lv.got" ] && want_prefix "$in" "$T/lv.got"
	[ "$way" = tmpfs ] && want_prefix "$in" "$mnt/out"
	if [ "$solo" != solo ]; then
		if [ $stops = 1 ]; then
			want_prefix "$in" "$T/s1"
			want_prefix "$in" "$T/s2.got"
		else
			want_same "$in" "$T/s1"
			want_same "$in" "$T/s2.got"
		fi
	fi
}

# leaves_matrix "NAME|OPTS"...: every cell for each path, a name and the
# options that force it (a NAME ending in "solo": the leaving output alone).
# PP_LEAVES_ONLY=GLOB runs only the cells whose case names match.
leaves_matrix() {
	local p pname opts solo way full mode
	local ways=(head kill9 devfull tmpfs tcp)
	local modes=("" warn exit exit-nopipe)
	for p in "$@"; do
		pname=${p%%|*}
		opts=${p#*|}
		solo=""
		case $pname in *solo) solo=solo ;; esac
		for way in "${ways[@]}"; do
			for full in notfull full; do
				for mode in "${modes[@]}"; do
					if [ "$way" = tmpfs ] && [ $have_tmpfs = 0 ]; then
						begin "${pname}_${way}_${full}_${mode:-default}"
						skip_case "cannot mount a tmpfs (not root?)"
						continue
					fi
					# A 600M buffer cannot fill from a 4 MiB input: the
					# big buffer's full case is buf_bigmem's notfull
					# with the pages of a whole input held.
					if [ "$pname" = buf_bigmem ] && [ "$full" = full ]; then
						continue
					fi
					case "${pname}_${way}_${full}_${mode:-default}" in
					${PP_LEAVES_ONLY:-*}) ;;
					*) continue ;;
					esac
					run_case "$pname" "$opts" "$way" "$full" "$mode" "$solo"
				done
			done
		done
	done
}
