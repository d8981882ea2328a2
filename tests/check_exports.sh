#!/usr/bin/env bash
# Checks that a shared libcuinline.so exports the C API and the C++ API (namespace cuinline) and
# nothing else. Usage: tests/check_exports.sh path/to/libcuinline.so
set -euo pipefail
lib=${1:?usage: check_exports.sh libcuinline.so}
syms=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^$')
bad=$(echo "$syms" | while read -r s; do
  case "$s" in cuinline_*) continue ;; esac
  d=$(echo "$s" | c++filt)
  case "$d" in cuinline::*|"typeinfo for cuinline::"*|"typeinfo name for cuinline::"*|"vtable for cuinline::"*|"VTT for cuinline::"*) ;;
  *) echo "$d" ;; esac
done)
if [ -n "$bad" ]; then
  echo "check_exports: $lib exports symbols outside the C and C++ APIs:" >&2
  echo "$bad" | head -20 >&2
  exit 1
fi
# (here-strings, not pipes into grep -q: under pipefail an early exit of grep fails the writer)
for need in cuinline_apply cuinline_load_inline cuinline_last_error; do
  grep -qx "$need" <<<"$syms" || { echo "check_exports: $need is not exported" >&2; exit 1; }
done
demangled=$(c++filt <<<"$syms")
grep -q '^cuinline::ops::apply' <<<"$demangled" || { echo "check_exports: the C++ API is not exported" >&2; exit 1; }
echo "check_exports: $(echo "$syms" | wc -l) symbols, all in the C or C++ API"
