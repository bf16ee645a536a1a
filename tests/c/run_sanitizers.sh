#!/usr/bin/env bash
# Build every C test in tests/c against all kernels in csrc/ with
# AddressSanitizer and UBSan (warnings are errors), and run them.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cc="${CC:-gcc}"
flags=(-std=c99 -O1 -g -Wall -Wextra -Werror -Wno-unused-parameter -fopenmp
       -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
status=0
for t in "$root"/tests/c/test_*.c; do
    name="$(basename "$t" .c)"
    "$cc" "${flags[@]}" -I"$root/csrc" -I"$root/tests/c" "$t" "$root"/csrc/*.c -lm -o "$out/$name"
    if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 "$out/$name"; then
        echo "PASS $name"
    else
        echo "FAIL $name"
        status=1
    fi
done
exit $status
