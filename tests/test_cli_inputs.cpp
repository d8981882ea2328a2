// What the `cuinline` command reads and writes. A spec, a .cu file or a header that is a FIFO, a
// device, a directory, holds a NUL byte or fails while being read is an error naming the file (exit
// 2), never a shorter input; nothing is compiled or written. A spec's files, the files its sources
// include and the files its options name stay inside its directory unless --allow-outside-paths, and
// a compile error never shows the text of a file outside it. An output file is a new file renamed
// over the target: a symlink planted there is replaced, not written through.

#include <sys/stat.h>

#include <utility>

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

// A key file beside the spec's directory, and the ways a spec can try to have warm read it (and show
// it: NVRTC echoes the line a diagnostic points at): each is refused before anything is compiled,
// naming the include or option; the key is never printed.
TEST_F(CliInputTest, ASpecsIncludesAndOptionsStayInsideItsDirectory) {
  const std::string secret = "SECRET_TOKEN_4f1c";
  write_file(dir_ / "key.txt", secret + " and more\n");
  const fs::path specs = dir_ / "specs";
  fs::create_directories(specs / "inc");
  const std::string key = (dir_ / "key.txt").string();
  const std::string kernel = "extern \"C\" __global__ void k(float* x) { x[0] = 1; }\n";
  const auto spec_with = [&](const std::string& source, const std::string& more) {
    write_file(specs / "k.cu", source + kernel);
    const fs::path path = specs / "s.json";
    write_file(path, R"({"entries": [{"kind": "cuda", "file": "k.cu", "functions": ["k"])" + more + "}]}");
    return path.string();
  };
  fs::create_symlink(dir_ / "key.txt", specs / "inc" / "evil.h");
  write_file(specs / "inc" / "nested.h", "#include \"../../key.txt\"\n");
  const std::string inc = R"(, "options": ["-I)" + (specs / "inc").string() + R"("])";
  struct Case {
    std::string source, more, message;
  };
  const std::vector<Case> refused = {
      {"#include \"" + key + "\"\n", "", "'k.cu' line 1: '#include \"" + key + "\"' reads '" + key + "'"},
      {"#include \"../key.txt\"\n", "", "'k.cu' line 1: '#include \"../key.txt\"' reads '" + key + "'"},
      {"// a comment\n#include <../../../../../../../../../.." + key + ">\n", "", "'k.cu' line 2: '#include <"},
      {"#define KEY \"" + key + "\"\n#include KEY\n", "", "'k.cu' line 2: '#include KEY' does not name its file literally"},
      {"/* a comment\n*/ %:include \"" + key + "\"\n", "", "'k.cu' line 2: '%:include"},
      {"#inc\\\nlude \"" + key + "\"\n", "", "'k.cu' line 1: '#include"},
      {"#include \"evil.h\"\n", inc, "'k.cu' line 1: '#include \"evil.h\"' reads '" + key + "'"},
      {"#include \"nested.h\"\n", inc, "nested.h' line 1: '#include \"../../key.txt\"' reads '" + key + "'"},
      {"", R"(, "options": ["--pre-include=)" + key + R"("])", "entries[0].options: '--pre-include=" + key + "' reads '" + key + "'"},
      {"", R"(, "options": ["-include", ")" + key + R"("])", "entries[0].options: '--pre-include=" + key + "'"},
      {"", R"(, "options": ["-I", ")" + dir_.string() + R"("])", "entries[0].options: '-I" + dir_.string() + "' reads the directory"},
      {"", R"(, "options": ["--time=)" + (dir_ / "t.csv").string() + R"("])", "entries[0].options: '--time="},
      {"", R"(, "options": ["--pch"])", "entries[0].options: '--pch'"},
      {"", R"(, "name_expressions": ["k\n#include \")" + key + R"(\""])", "entries[0].name_expressions[0]: must not contain control characters"}};
  for (const Case& c : refused) {
    Result r = cli({"warm", "--spec", spec_with(c.source, c.more), "--arch", "sm_90"});
    EXPECT_EQ(r.code, 2) << c.message << "\n" << r.out << r.err;
    EXPECT_CONTAINS(r.err, c.message);
    EXPECT_EQ((r.out + r.err).find(secret), std::string::npos) << r.out << r.err;
  }
  EXPECT_TRUE(entry_files().empty());
  EXPECT_FALSE(fs::exists(dir_ / "t.csv"));
  // Inside the directory (through an -I directory of it), and the toolkit's headers: compiled.
  write_file(specs / "inc" / "scale.h", "#include <cuda_fp16.h>\n#define SCALE 2.0f\n");
  Result ok = cli({"warm", "--spec", spec_with("#include \"scale.h\"\n", inc), "--arch", "sm_90"});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_EQ(entry_files().size(), 1u);
  // --allow-outside-paths lets the spec read the file, but its compile error still does not show it.
  Result allowed = cli({"warm", "--spec", spec_with("#include \"" + key + "\"\n", ""), "--arch", "sm_90", "--allow-outside-paths"});
  EXPECT_EQ(allowed.code, 1) << allowed.out << allowed.err;
  EXPECT_CONTAINS(allowed.err, key + "(1): (withheld: a diagnostic in a file outside the spec's directory");
  EXPECT_EQ((allowed.out + allowed.err).find(secret), std::string::npos) << allowed.err;
}

// `compile -o OUT` writes a new file and renames it over OUT: a symlink someone planted at OUT (in a
// team's group-writable directory) is replaced, and the file it points at is left alone.
TEST_F(CliInputTest, CompileReplacesASymlinkAtItsOutput) {
  write_file(dir_ / "k.cu", "extern \"C\" __global__ void k(float* x) { x[0] = 1; }\n");
  write_file(dir_ / "victim", "precious");
  const fs::path team = dir_ / "team";
  ASSERT_TRUE(fs::create_directory(team));
  ASSERT_EQ(::chmod(team.c_str(), 02770), 0);
  fs::create_symlink(dir_ / "victim", team / "k.cubin");
  fs::create_symlink(dir_ / "planted-by-someone", team / "k.ptx");  // dangling: would be created
  Result cubin = cli({"compile", (dir_ / "k.cu").string(), "--arch", "sm_90", "-o", (team / "k.cubin").string()});
  ASSERT_EQ(cubin.code, 0) << cubin.err;
  Result ptx = cli({"compile", (dir_ / "k.cu").string(), "--arch", "sm_90", "--ptx", "-o", (team / "k.ptx").string()});
  ASSERT_EQ(ptx.code, 0) << ptx.err;
  EXPECT_EQ(read_file(dir_ / "victim"), "precious");
  EXPECT_FALSE(fs::exists(dir_ / "planted-by-someone"));
  EXPECT_FALSE(fs::is_symlink(team / "k.cubin"));
  EXPECT_EQ(read_file(team / "k.cubin").substr(0, 4), "\x7f" "ELF");
  EXPECT_CONTAINS(read_file(team / "k.ptx"), ".target sm_90");
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(team)) ++files;
  EXPECT_EQ(files, 2u) << "a temporary file was left behind";
  // A directory at the output: an error naming it, nothing left behind.
  fs::create_directory(team / "dir.cubin");
  Result dir = cli({"compile", (dir_ / "k.cu").string(), "--arch", "sm_90", "-o", (team / "dir.cubin").string()});
  EXPECT_EQ(dir.code, 1) << dir.out << dir.err;
  EXPECT_CONTAINS(dir.err, "cannot write '" + (team / "dir.cubin").string() + "'");
  files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(team)) ++files;
  EXPECT_EQ(files, 3u);
}

}  // namespace
