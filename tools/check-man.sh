#!/bin/sh
# check-man.sh - check the manual pages in man/ against include/pagepipe.h.
#
# For every function declared in the header (a `pp_name(' declaration,
# comments stripped):
#   - man/NAME.3 exists, either as a page or as a one-line `.so man3/X.3'
#     stub whose target man/X.3 exists and is not itself a stub;
#   - the NAME section of the page (after following the stub) lists NAME;
#   - the SYNOPSIS shows the prototype exactly as the header declares it
#     (compared after collapsing white space);
#   - the ERRORS section names every errno (E...) that the header's comment
#     for the declaration gives as an error of the call: those after the
#     first "-1", "NULL with" or "errors:" in the comment, or all of them
#     if it has none of these.
# For every man/*.3:
#   - it renders with `groff -man -ww' without any warning or error;
#   - a page has the sections NAME, SYNOPSIS, DESCRIPTION and SEE ALSO, and
#     a page that documents functions also RETURN VALUE and ERRORS;
#   - every name in its NAME section is a declared function (the overview
#     page pagepipe.3 excepted), and every stub is named after one;
#   - every pagepipe(3) or pp_*(3) reference in SEE ALSO has a page, and
#     so does a pagepipe(1) reference;
#   - each C program in the EXAMPLES section (an .EX block with #include)
#     compiles against include/ with -Wall -Wextra -Werror (skipped when no
#     C compiler is found; set CC to choose one).
# For every man/*.1 (the command's page):
#   - it renders with `groff -man -ww' without any warning or error;
#   - it has the sections NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXIT STATUS
#     and SEE ALSO, and its NAME section lists the page's own name;
#   - every pagepipe(3), pp_*(3) or pagepipe(1) reference in SEE ALSO has
#     a page.
# Prints each problem and exits 1 if there was any, 2 if it cannot run.
#
# Usage: tools/check-man.sh        (from anywhere inside the tree)

set -u
top=$(cd "$(dirname "$0")/.." && pwd) || exit 2
cd "$top" || exit 2
hdr=include/pagepipe.h
mandir=man

if ! command -v groff >/dev/null 2>&1; then
	echo "check-man: groff not found (apt-get install groff)" >&2
	exit 2
fi
[ -r "$hdr" ] || { echo "check-man: $hdr missing" >&2; exit 2; }
[ -d "$mandir" ] || { echo "check-man: $mandir/ missing" >&2; exit 2; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
# `.so man3/X.3' stubs are resolved through a man3 link to man/.
ln -s "$top/$mandir" "$tmp/man3"

fail=0
bad() {
	echo "check-man: $*"
	fail=1
}

# One line per declared function: name TAB prototype TAB errnos.  The
# comment block right before a declaration (or a run of declarations)
# belongs to it; a blank line ends a comment block's reach.
awk '
function errnos(text,    n, i, w, out, seen) {
	if (match(text, /-1|NULL with|[Ee]rrors?:/))
		text = substr(text, RSTART)
	n = split(text, w, /[^A-Za-z0-9_]+/)
	out = ""
	for (i = 1; i <= n; i++)
		if (w[i] ~ /^E[A-Z0-9]+$/ && !(w[i] in seen)) {
			seen[w[i]] = 1
			out = out (out == "" ? "" : " ") w[i]
		}
	return out
}
BEGIN { inc = 0; cmt = ""; stmt = "" }
{
	raw = $0
	if (!inc && raw ~ /^[ \t]*\/\*/)
		cmt = ""
	line = raw; code = ""; text = ""
	while (line != "") {
		if (inc) {
			i = index(line, "*/")
			if (i == 0) { text = text " " line; line = "" }
			else {
				text = text " " substr(line, 1, i - 1)
				line = substr(line, i + 2); inc = 0
			}
		} else {
			i = index(line, "/*")
			if (i == 0) { code = code " " line; line = "" }
			else {
				code = code " " substr(line, 1, i - 1)
				line = substr(line, i + 2); inc = 1
			}
		}
	}
	cmt = cmt " " text
	if (raw ~ /^[ \t]*$/) { cmt = ""; next }
	if (code ~ /^[ \t]*#/) next
	stmt = stmt " " code
	while ((i = index(stmt, ";")) > 0) {
		s = substr(stmt, 1, i)
		stmt = substr(stmt, i + 1)
		sub(/.*[{}]/, "", s)
		if (match(s, /pp_[a-z0-9_]*[ \t]*\(/)) {
			name = substr(s, RSTART, RLENGTH - 1)
			sub(/[ \t]+$/, "", name)
			gsub(/[ \t]+/, " ", s)
			sub(/^ /, "", s)
			print name "\t" s "\t" errnos(cmt)
		}
	}
	sub(/.*[{}]/, "", stmt)
}' "$hdr" >"$tmp/decls"

if [ ! -s "$tmp/decls" ]; then
	bad "no pp_ function declarations found in $hdr"
	exit 1
fi
cut -f1 "$tmp/decls" >"$tmp/names"

is_decl() {
	grep -qx "$1" "$tmp/names"
}

# Print the target page of a stub (e.g. pp_read.3), or nothing.
stub_target() {
	sed -n '1s|^\.so man3/\([^/ ]*\.3\)[ \t]*$|\1|p' "$1"
}

# Render a page as plain text, long lines, no hyphenation.
render() {
	groff -man -Tascii -P-c -P-b -P-u -P-o -rLL=250n -rHY=0 \
		-I "$tmp" "$1" 2>/dev/null
}

# The body of section $2 of rendered text $1, joined into one line.
section() {
	awk -v want="$2" '
		/^[A-Z][A-Z ]*[A-Z]$/ { on = ($0 == want); next }
		on { printf "%s ", $0 }' "$1" | tr -s ' \t' '  '
}

# Every pagepipe(3), pp_*(3) and pagepipe(1) reference in the SEE ALSO of
# the page rendered in $tmp/page.txt ($1 names it) has a page.
see_also_refs() {
	for ref in $(section "$tmp/page.txt" "SEE ALSO" |
		grep -o '\(pagepipe\|pp_[a-z0-9_]*\)(3)\|pagepipe(1)'); do
		sec=${ref#*(}
		sec=${sec%)}
		ref=${ref%(*}
		[ -f "$mandir/$ref.$sec" ] ||
			bad "$1: SEE ALSO $ref($sec) has no page $mandir/$ref.$sec"
	done
}

# Every page renders cleanly and has the expected shape.
for page in "$mandir"/*.3; do
	[ -e "$page" ] || { bad "no pages in $mandir/"; break; }
	base=$(basename "$page" .3)
	target=$(stub_target "$page")
	if [ -n "$target" ]; then
		if [ "$(wc -l <"$page")" -ne 1 ]; then
			bad "$page: a .so stub must be that one line only"
		fi
		if [ ! -f "$mandir/$target" ]; then
			bad "$page: .so target $mandir/$target does not exist"
			continue
		fi
		if [ -n "$(stub_target "$mandir/$target")" ]; then
			bad "$page: .so target $mandir/$target is itself a stub"
		fi
		is_decl "$base" ||
			bad "$page: stub for $base, which $hdr does not declare"
	elif grep -q '^\.so' "$page"; then
		bad "$page: .so line is not of the form '.so man3/NAME.3'"
		continue
	fi

	warn=$(groff -man -Tutf8 -ww -z -I "$tmp" "$page" 2>&1)
	if [ -n "$warn" ]; then
		bad "$page: groff reports:"
		printf '%s\n' "$warn" | sed 's/^/    /'
	fi
	[ -n "$target" ] && continue

	render "$page" >"$tmp/page.txt"
	for sec in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
		grep -qx "$sec" "$tmp/page.txt" ||
			bad "$page: no $sec section"
	done
	names=$(section "$tmp/page.txt" NAME | sed 's/ - .*//; s/,/ /g')
	[ -n "$names" ] || bad "$page: empty NAME section"
	documents_functions=0
	for n in $names; do
		if is_decl "$n"; then
			documents_functions=1
		elif [ "$base" != pagepipe ]; then
			bad "$page: NAME lists $n, which $hdr does not declare"
		fi
	done
	if [ "$documents_functions" = 1 ]; then
		for sec in "RETURN VALUE" ERRORS; do
			grep -qx "$sec" "$tmp/page.txt" ||
				bad "$page: no $sec section"
		done
	fi
	see_also_refs "$page"
done

# The command's pages (section 1).
for page in "$mandir"/*.1; do
	[ -e "$page" ] || break
	base=$(basename "$page" .1)
	warn=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
	if [ -n "$warn" ]; then
		bad "$page: groff reports:"
		printf '%s\n' "$warn" | sed 's/^/    /'
	fi
	render "$page" >"$tmp/page.txt"
	for sec in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" "SEE ALSO"; do
		grep -qx "$sec" "$tmp/page.txt" ||
			bad "$page: no $sec section"
	done
	section "$tmp/page.txt" NAME | sed 's/ - .*//; s/,/ /g' |
		tr ' ' '\n' | grep -qx "$base" ||
		bad "$page: NAME section does not list $base"
	see_also_refs "$page"
done

# Every declared function has a page that documents it.
tab=$(printf '\t')
while IFS="$tab" read -r name proto errs; do
	page="$mandir/$name.3"
	if [ ! -f "$page" ]; then
		bad "$name: no page $page"
		continue
	fi
	target=$(stub_target "$page")
	[ -n "$target" ] && page="$mandir/$target"
	[ -f "$page" ] || continue
	render "$page" >"$tmp/page.txt"
	section "$tmp/page.txt" NAME | sed 's/ - .*//; s/,/ /g' |
		tr ' ' '\n' | grep -qx "$name" ||
		bad "$name: NAME section of $page does not list it"
	section "$tmp/page.txt" SYNOPSIS >"$tmp/synopsis"
	grep -qF -- "$proto" "$tmp/synopsis" ||
		bad "$name: SYNOPSIS of $page lacks the prototype '$proto'"
	if [ -n "$errs" ]; then
		section "$tmp/page.txt" ERRORS >"$tmp/errors"
		for e in $errs; do
			grep -qw -- "$e" "$tmp/errors" ||
				bad "$name: $hdr documents $e, ERRORS of $page does not"
		done
	fi
done <"$tmp/decls"

# The example programs compile.
cc=${CC:-}
if [ -z "$cc" ]; then
	for c in cc gcc clang; do
		if command -v "$c" >/dev/null 2>&1; then cc=$c; break; fi
	done
fi
if [ -z "$cc" ] || ! command -v "$cc" >/dev/null 2>&1; then
	echo "check-man: no C compiler found; examples not compiled"
else
	for page in "$mandir"/*.3; do
		[ -n "$(stub_target "$page")" ] && continue
		# Each .EX block of the EXAMPLES section that holds a program
		# goes to its own file, with the roff escapes undone.
		rm -f "$tmp"/ex*.c
		awk -v dir="$tmp" '
			/^\.SH / { inex = ($0 ~ /^\.SH "?EXAMPLES?"?$/); next }
			inex && /^\.EX/ { n++; body = ""; on = 1; next }
			inex && /^\.EE/ {
				on = 0
				if (body ~ /#include/) {
					f = dir "/ex" n ".c"
					printf "%s", body > f
					close(f)
				}
				next
			}
			on {
				l = $0
				gsub(/\\&/, "", l)
				gsub(/\\\(aq/, "\047", l)
				gsub(/\\-/, "-", l)
				gsub(/\\e/, "\\", l)
				body = body l "\n"
			}' "$page"
		for ex in "$tmp"/ex*.c; do
			[ -e "$ex" ] || continue
			if ! out=$("$cc" -std=gnu11 -Wall -Wextra -Werror \
				-fsyntax-only -Iinclude "$ex" 2>&1); then
				bad "$page: example does not compile with $cc:"
				printf '%s\n' "$out" | sed 's/^/    /'
			fi
		done
	done
fi

if [ "$fail" = 0 ]; then
	echo "check-man: $(wc -l <"$tmp/names") functions, $(ls "$mandir"/*.3 | wc -l) pages, $(ls "$mandir"/*.1 2>/dev/null | wc -l) command pages: all good"
fi
exit "$fail"
