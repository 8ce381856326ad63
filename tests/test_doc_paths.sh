#!/bin/sh
# Every source path that README.md and docs/*.md name exists: docs that
# name a file that moved or never existed mislead the next reader.
# A path is a backquoted word starting with one of the tree's top folders;
# globs (*), placeholders (NAME, <...>) and libtool outputs (.libs/) are
# skipped; a program counts when its source exists or Makefile.am builds it.
cd "$(dirname "$0")/.." || exit 1
missing=0
checked=0
for doc in README.md docs/*.md; do
  for p in $(grep -o '`[^` ]*`' "$doc" | tr -d '`' |
             grep -E '^(src|transports|tests|bench|tools|include|docs|examples|scripts|python)/' |
             grep -vE '[*<>{}$]|NAME|\.\.\.|\.libs/' | sed 's/[.,:;)]*$//; s/:[0-9-]*$//' | sort -u); do
    checked=$((checked + 1))
    # a named function (file.c:func) or anchor (file.md#x) counts by its file
    f=${p%%#*}
    # a program is named by its source (bench/ceiling: bench/ceiling.c)
    { [ -e "$f" ] || [ -e "$f.c" ] || [ -e "$f.sh" ] || [ -e "$f.py" ]; } && continue
    grep -q "^[a-z_]*PROGRAMS.*$f\|^$(echo "$f" | tr '/.-' '___')_SOURCES" Makefile.am && continue
    echo "FAIL: $doc names $p, which does not exist"
    missing=$((missing + 1))
  done
done
echo "checked $checked paths named in README.md and docs/*.md"
[ "$missing" -eq 0 ] && { echo "1 passed, 0 failed"; exit 0; }
echo "0 passed, 1 failed"
exit 1
