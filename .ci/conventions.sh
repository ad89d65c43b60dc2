#!/usr/bin/env bash
# Runs the checks of docs/conventions.md "One definition per fact": for each
# row of that table, the command in its "check" column (run at the
# repository root) must print lines from exactly the files its last column
# names ("nothing": no line at all). A second definition of a fact shows up
# as a file the row does not name, and fails `make lint`. The table is the
# one place the facts and their checks are written; this script only reads
# it, so a row added there is checked with no edit here.
set -euo pipefail
cd "$(dirname "$0")/.."
doc=docs/conventions.md

# One line per row: the command, a tab, the files (space separated). The
# table's cells escape '|' as '\|' (Markdown); it is unescaped in the
# command.
rows=$(sed -n '/^## One definition per fact/,/^## [^O]/p' "$doc" | grep '^| ' | tail -n +2 |
	sed 's/\\|/\x02/g' |
	awk -F'|' '{
		cmd = $4; if (match(cmd, /`[^`]+`/)) cmd = substr(cmd, RSTART + 1, RLENGTH - 2); else cmd = ""
		gsub(/\x02/, "|", cmd)
		files = ""; f = $5
		while (match(f, /`[^`]+`/)) { files = files " " substr(f, RSTART + 1, RLENGTH - 2); f = substr(f, RSTART + RLENGTH) }
		printf "%s\t%s\n", cmd, files
	}')
if [ -z "$rows" ]; then
	echo "conventions: no rows found under '## One definition per fact' in $doc" >&2
	exit 1
fi

fail=0 n=0
while IFS=$'\t' read -r cmd files; do
	n=$((n + 1))
	if [ -z "$cmd" ]; then
		echo "conventions: row $n of the table in $doc has no \`command\` in its check column" >&2
		fail=1
		continue
	fi
	# grep exits 1 when it finds nothing: that is an answer, not an error.
	out=$(bash -c "$cmd" || true)
	got=$(printf '%s\n' "$out" | sed -e '/^$/d' -e 's#^\./##' -e 's#:.*##' | sort -u | tr '\n' ' ' | sed 's/ $//')
	want=$(printf '%s\n' $files | sed -e '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//')
	if [ "$got" != "$want" ]; then
		echo "conventions: $doc row $n: $cmd" >&2
		echo "  prints lines from: ${got:-nothing}" >&2
		echo "  the table allows:  ${want:-nothing}" >&2
		echo "  (a fact defined a second time: use the one definition; or, if the fact moved, update the table)" >&2
		printf '%s\n' "$out" | sed -e '/^$/d' -e 's/^/    /' >&2
		fail=1
	fi
done <<<"$rows"
if [ "$fail" = 0 ]; then
	echo "conventions: $n facts, one definition each ($doc)"
fi
exit "$fail"
