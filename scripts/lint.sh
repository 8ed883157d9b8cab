#!/usr/bin/env bash
# The CI gates besides the tests: formatting, clang-tidy, public-header check, banned functions.
#   scripts/lint.sh BUILD_DIR     (BUILD_DIR holds compile_commands.json)
set -uo pipefail
build=${1:-build/dev}
cd "$(dirname "$0")/.."
fail=0
step() { printf '== %s\n' "$1"; }

mapfile -t csrc < <(git ls-files '*.c' '*.h')

step "clang-format --dry-run --Werror (${#csrc[@]} files)"
if ! clang-format --dry-run --Werror "${csrc[@]}"; then
  echo "clang-format: run 'clang-format -i' on the files above"; fail=1
fi

step "clang-tidy"
if [[ ! -f "$build/compile_commands.json" ]]; then
  echo "no $build/compile_commands.json: build first"; fail=1
else
  # Project sources only (tests and fuzzers included); generated files are not tidied.
  mapfile -t tidy < <(git ls-files 'src/*.c' 'tests/*.c' 'fuzz/*.c' 'bench/*.c')
  if ! printf '%s\n' "${tidy[@]}" | xargs -r -P "$(nproc)" -n 4 clang-tidy -p "$build" --quiet \
       --extra-arg=-Wno-unknown-warning-option 2> >(grep -v -E '^[0-9]+ warnings? generated' >&2); then
    echo "clang-tidy: failed"; fail=1
  fi
fi

step "public headers: -std=c99 -pedantic -Werror"
tmp=$(mktemp -d)
for h in include/sbx/*.h; do
  printf '#include "%s"\nint main(void) { return 0; }\n' "$PWD/$h" > "$tmp/t.c"
  for cc in gcc clang; do
    if ! $cc -std=c99 -pedantic -Wall -Wextra -Werror -Iinclude -c "$tmp/t.c" -o "$tmp/t.o"; then
      echo "header $h does not compile standalone with $cc"; fail=1
    fi
  done
done
rm -rf "$tmp"

step "banned functions"
if git grep -n -E '\b(sprintf|strcpy|strcat|strtok|atoi|gets)\s*\(' -- '*.c' '*.h'; then
  echo "banned function used (use snprintf, memcpy with lengths, strtok_r, sbx_parse_*, fgets)"
  fail=1
fi

if [[ $fail -ne 0 ]]; then echo "lint: FAILED"; else echo "lint: ok"; fi
exit $fail
