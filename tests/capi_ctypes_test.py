"""The C API from Python through ctypes, as an engine loads it: libcuinline.so (BUILD_SHARED_LIBS=ON)
with ctypes.CDLL, no GPU needed. Checks the version, a configuration before first use, bad input
(status 1 and a message naming the problem), and a load_inline compile for sm_90 counted in the
cache statistics. Usage: python3 tests/capi_ctypes_test.py path/to/libcuinline.so"""
import ctypes
import sys
import tempfile


class Options(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("sources", ctypes.POINTER(ctypes.c_char_p)), ("num_sources", ctypes.c_int),
                ("functions", ctypes.POINTER(ctypes.c_char_p)), ("num_functions", ctypes.c_int),
                ("name_expressions", ctypes.POINTER(ctypes.c_char_p)), ("num_name_expressions", ctypes.c_int),
                ("options", ctypes.POINTER(ctypes.c_char_p)), ("num_options", ctypes.c_int),
                ("header_names", ctypes.POINTER(ctypes.c_char_p)), ("header_contents", ctypes.POINTER(ctypes.c_char_p)),
                ("num_headers", ctypes.c_int), ("device", ctypes.c_int), ("arch", ctypes.c_char_p)]


class Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("memory_hits", "disk_hits", "compiles", "compile_failures",
                                               "disk_writes", "disk_write_failures", "evictions", "rejected_entries")]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64))]


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.cuinline_last_error.restype = ctypes.c_char_p
    lib.cuinline_version.restype = ctypes.c_char_p
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(f"{what} (last error: {lib.cuinline_last_error().decode()})")

    expect(len(lib.cuinline_version()) > 0, "version")
    expect(lib.cuinline_device_count() >= 0, "device count")
    with tempfile.TemporaryDirectory() as d:
        expect(lib.cuinline_configure_cache(d.encode(), ctypes.c_uint64(0), 1) == 0, "configure the cache")
        shape = (ctypes.c_int64 * 1)(16)
        buf = (ctypes.c_float * 16)()
        t = Tensor(ctypes.cast(buf, ctypes.c_void_p), 0, 1, shape, None)
        expect(lib.cuinline_apply(b"relu|bogus", ctypes.byref(t), 1, ctypes.byref(t), 1, None) == 1, "a bad op")
        expect(b"bogus" in lib.cuinline_last_error(), "the message names the bad step")
        src = ctypes.c_char_p(b'extern "C" __global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }')
        fn = ctypes.c_char_p(b"k")
        o = Options(name=b"ctypes_test", sources=ctypes.pointer(src), num_sources=1,
                    functions=ctypes.pointer(fn), num_functions=1, device=-1, arch=b"sm_90")
        module = ctypes.c_void_p()
        expect(lib.cuinline_load_inline(ctypes.byref(o), ctypes.byref(module)) == 0, "load_inline for sm_90")
        stats = Stats()
        expect(lib.cuinline_get_cache_stats(ctypes.byref(stats)) == 0 and stats.compiles == 1, "one compile counted")
        lib.cuinline_module_release(module)
    for f in failures:
        print("FAIL", f)
    print(f"{9 - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
