// What the `cuinline` command reads (issue 20, bounded inputs): a spec, a .cu file or a header that
// is a FIFO, a device, a directory, holds a NUL byte or fails while being read is an error naming
// the file (exit 2), never a shorter input; nothing is compiled or written. A spec's files stay inside
// its directory unless --allow-outside-paths (issue 20, spec paths).

#include <sys/stat.h>

#include "cli_test_support.hpp"

namespace {

using namespace cuinline::test;

const std::string kCudaSpec =
    R"({"entries": [{"kind": "cuda", "file": "k.cu", "functions": ["k"], "headers": ["h.cuh"]}]})";
const std::string kKernel = "#include \"h.cuh\"\nextern \"C\" __global__ void k(float* x) { x[0] = SCALE; }\n";

class CliInputTest : public CliTest {
 protected:
  // `cuinline warm --dry-run` of `spec`; must fail with exit 2 naming `needle`, writing nothing.
  void expect_refused(const std::string& spec, const std::string& needle) {
    Result r = cli({"warm", "--spec", spec, "--arch", "sm_90"});
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_CONTAINS(r.err, needle);
    EXPECT_TRUE(entry_files().empty());
  }
};

TEST_F(CliInputTest, ASpecThatIsNotARegularFileIsNamed) {
  const fs::path fifo = dir_ / "spec.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Before: the read blocked for a writer (a FIFO) or never ended (/dev/zero).
  expect_refused(fifo.string(), "--spec: '" + fifo.string() + "' is a FIFO, not a regular file");
  expect_refused("/dev/zero", "--spec: '/dev/zero' is a character device, not a regular file");
  expect_refused(dir_.string(), "--spec: '" + dir_.string() + "' is a directory, not a regular file");
}

TEST_F(CliInputTest, ASpecWithANulByteIsNamed) {
  const fs::path spec = write_spec("nul.json", std::string(R"({"entries": []})") + '\0' + "trailing");
  expect_refused(spec.string(), "--spec: '" + spec.string() + "' contains a NUL byte at offset 15");
}

TEST_F(CliInputTest, AReadErrorIsAnErrorNotAShorterSpec) {
  // /proc/self/mem is a regular file whose read at offset 0 fails (EIO): an ifstream read it as empty.
  expect_refused("/proc/self/mem", "--spec: '/proc/self/mem': read failed after 0 bytes");
}

TEST_F(CliInputTest, ACudaFileOrHeaderThatIsAFifoOrHoldsNulIsNamed) {
  const fs::path spec = write_spec("cuda.json", kCudaSpec);
  write_file(dir_ / "h.cuh", "#define SCALE 2.0f\n");
  ASSERT_EQ(::mkfifo((dir_ / "k.cu").c_str(), 0600), 0);
  expect_refused(spec.string(), "entries[0].file: '" + (dir_ / "k.cu").string() + "' is a FIFO");
  fs::remove(dir_ / "k.cu");
  write_file(dir_ / "k.cu", kKernel + std::string(1, '\0'));
  expect_refused(spec.string(), "entries[0].file: '" + (dir_ / "k.cu").string() + "' contains a NUL byte");
  write_file(dir_ / "k.cu", kKernel);
  fs::remove(dir_ / "h.cuh");
  ASSERT_EQ(::mkfifo((dir_ / "h.cuh").c_str(), 0600), 0);
  expect_refused(spec.string(), "entries[0].headers: '" + (dir_ / "h.cuh").string() + "' is a FIFO");
  // The same files, made right, are compiled: the refusals above were about the files alone.
  fs::remove(dir_ / "h.cuh");
  write_file(dir_ / "h.cuh", "#define SCALE 2.0f\n");
  Result ok = cli({"warm", "--spec", spec.string(), "--arch", "sm_90"});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_EQ(entry_files().size(), 1u);
}

TEST_F(CliInputTest, CompileRefusesADeviceAsItsSource) {
  Result r = cli({"compile", "/dev/zero", "--arch", "sm_90"});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_CONTAINS(r.err, "compile: '/dev/zero' is a character device, not a regular file");
}

TEST_F(CliInputTest, ASpecsFilesStayInsideItsDirectory) {
  fs::create_directory(dir_ / "specs");
  write_file(dir_ / "outside.cu", kKernel);
  write_file(dir_ / "h.cuh", "#define SCALE 2.0f\n");
  write_file(dir_ / "specs" / "h.cuh", "#define SCALE 2.0f\n");
  const auto spec_with = [&](const std::string& file, const std::string& header) {
    const fs::path path = dir_ / "specs" / "s.json";
    write_file(path, R"({"entries": [{"kind": "cuda", "file": ")" + file + R"(", "functions": ["k"], "headers": [")" +
                         header + R"("]}]})");
    return path.string();
  };
  expect_refused(spec_with("../outside.cu", "h.cuh"),
                 "entries[0].file: '../outside.cu' is outside the spec's directory '" + (dir_ / "specs").string() +
                     "' (pass --allow-outside-paths");
  expect_refused(spec_with((dir_ / "outside.cu").string(), "h.cuh"), "is outside the spec's directory");
  fs::create_symlink(dir_ / "outside.cu", dir_ / "specs" / "link.cu");
  expect_refused(spec_with("link.cu", "h.cuh"), "entries[0].file: 'link.cu' is outside the spec's directory");
  write_file(dir_ / "specs" / "k.cu", kKernel);
  expect_refused(spec_with("k.cu", "../h.cuh"), "entries[0].headers: '../h.cuh' is outside the spec's directory");
  // Inside (a subdirectory and back is fine), and outside with the flag.
  Result inside = cli({"warm", "--spec", spec_with("./sub/../k.cu", "h.cuh"), "--arch", "sm_90", "--dry-run"});
  EXPECT_EQ(inside.code, 0) << inside.err;
  Result allowed = cli({"warm", "--spec", spec_with("../outside.cu", "../h.cuh"), "--arch", "sm_90",
                        "--allow-outside-paths"});
  EXPECT_EQ(allowed.code, 0) << allowed.out << allowed.err;
  EXPECT_EQ(entry_files().size(), 1u);
  // A header that is a symlink inside the directory is read through it and keeps its own name.
  fs::create_symlink(dir_ / "specs" / "h.cuh", dir_ / "specs" / "alias.cuh");
  write_file(dir_ / "specs" / "k2.cu", "#include \"alias.cuh\"\nextern \"C\" __global__ void k(float* x) { x[0] = 3 * SCALE; }\n");
  Result alias = cli({"warm", "--spec", spec_with("k2.cu", "alias.cuh"), "--arch", "sm_90"});
  EXPECT_EQ(alias.code, 0) << alias.out << alias.err;
  EXPECT_EQ(entry_files().size(), 2u);
}

}  // namespace
