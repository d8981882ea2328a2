// CUINLINE_TEMPLATE_DIR gets the cache directory's rules: a directory, a directory above it or a
// template another user owns or anyone else can write is refused (it chooses the code compiled and
// run); a template that is a FIFO, a directory, a symlink, larger than 4 MiB or holding NUL bytes is
// an error naming the file — never silently skipped or truncated; a template the directory does not
// have comes from the embedded copy. Templates in subfolders (arch/...) are read through folders held
// to the same rules, and a name never leaves the directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cuinline/error.hpp>
#include <fstream>
#include <functional>
#include <string>

#include "templates/template_source.hpp"
#include "test_support.hpp"

namespace {

using cuinline::InvalidArgument;

class TemplateDir : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(setenv("CUINLINE_TEMPLATE_DIR", dir_.path().c_str(), 1), 0); }
  void TearDown() override { unsetenv("CUINLINE_TEMPLATE_DIR"); }
  std::string path(const char* name) const { return (dir_.path() / name).string(); }
  void write(const char* name, const std::string& text) { std::ofstream(path(name), std::ios::binary) << text; }
  static std::string refusal(const std::function<void()>& f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "(no InvalidArgument)";
  }
  cuinline::test::TempDir dir_{"tpldir"};
};

TEST_F(TemplateDir, AnOverrideIsUsedAndAMissingFileIsEmbedded) {
  write("elementwise.cuh", "// overridden\n");
  EXPECT_EQ(cuinline::detail::template_text("elementwise.cuh"), "// overridden\n");
  EXPECT_NE(cuinline::detail::template_text("ew_common.cuh").find("ew_traits"), std::string::npos);
}

TEST_F(TemplateDir, AWritableDirectoryIsRefused) {
  write("elementwise.cuh", "// planted\n");
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
  const std::string m = refusal([] { cuinline::detail::template_text("ew_common.cuh"); });
  EXPECT_NE(m.find("writable by group or others (mode 0777)"), std::string::npos) << m;
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0700), 0);
}

TEST_F(TemplateDir, AWritableOrForeignTemplateIsRefused) {
  write("elementwise.cuh", "// planted\n");
  ASSERT_EQ(::chmod(path("elementwise.cuh").c_str(), 0666), 0);
  std::string m = refusal([] { cuinline::detail::template_text("elementwise.cuh"); });
  EXPECT_NE(m.find("elementwise.cuh"), std::string::npos) << m;
  EXPECT_NE(m.find("writable by group or others"), std::string::npos) << m;
  if (::geteuid() == 0) {
    ASSERT_EQ(::chmod(path("elementwise.cuh").c_str(), 0644), 0);
    ASSERT_EQ(::chown(path("elementwise.cuh").c_str(), 4242, 4242), 0);
    m = refusal([] { cuinline::detail::template_text("elementwise.cuh"); });
    EXPECT_NE(m.find("owned by uid 4242"), std::string::npos) << m;
  }
}

// The directories above the template directory get the cache directory's checks (the same walk):
// whoever can replace one of them chooses the directory the templates are read from.
TEST_F(TemplateDir, AParentOthersCanWriteOrAnotherUserOwnsIsRefused) {
  const std::string open = path("open");
  ASSERT_EQ(::mkdir(open.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  const std::string templates = open + "/templates";
  ASSERT_EQ(::mkdir(templates.c_str(), 0700), 0);
  std::ofstream(templates + "/elementwise.cuh") << "// planted\n";
  ASSERT_EQ(setenv("CUINLINE_TEMPLATE_DIR", templates.c_str(), 1), 0);
  std::string m = refusal([] { cuinline::detail::template_text("elementwise.cuh"); });
  EXPECT_NE(m.find("'" + open + "' is writable by group or others (mode 0777, not sticky)"), std::string::npos)
      << m;
  // A sticky parent (like /tmp) is fine.
  ASSERT_EQ(::chmod(open.c_str(), 01777), 0);
  EXPECT_EQ(cuinline::detail::template_text("elementwise.cuh"), "// planted\n");
  if (::geteuid() == 0) {
    // A parent another user owns: its owner could rename the directory away and put another there.
    ASSERT_EQ(::chmod(open.c_str(), 0755), 0);
    ASSERT_EQ(::chown(open.c_str(), 65534, 65534), 0);
    m = refusal([] { cuinline::detail::template_text("elementwise.cuh"); });
    EXPECT_NE(m.find("'" + open + "' is owned by uid 65534"), std::string::npos) << m;
    ASSERT_EQ(::chown(open.c_str(), 0, 0), 0);
  }
  ASSERT_EQ(::chmod(open.c_str(), 0700), 0);
}

TEST_F(TemplateDir, AFifoADirectoryASymlinkAHugeFileAndNulBytesAreErrorsNamingTheFile) {
  ASSERT_EQ(::mkfifo(path("ew_common.cuh").c_str(), 0600), 0);
  std::string m = refusal([] { cuinline::detail::template_text("ew_common.cuh"); });
  EXPECT_NE(m.find("ew_common.cuh"), std::string::npos) << m;
  EXPECT_NE(m.find("not a regular file"), std::string::npos) << m;
  ASSERT_EQ(::mkdir(path("ew_ops.cuh").c_str(), 0700), 0);
  m = refusal([] { cuinline::detail::template_text("ew_ops.cuh"); });
  EXPECT_NE(m.find("a directory"), std::string::npos) << m;
  ASSERT_EQ(::symlink("/etc/hostname", path("conv2d.cuh").c_str()), 0);
  m = refusal([] { cuinline::detail::template_text("conv2d.cuh"); });
  EXPECT_NE(m.find("symbolic link"), std::string::npos) << m;
  write("elementwise.cuh", std::string((4 << 20) + 1, ' '));
  m = refusal([] { cuinline::detail::template_text("elementwise.cuh"); });
  EXPECT_NE(m.find("more than a template may have"), std::string::npos) << m;
  write("ew_nary.cuh", std::string("// a\0b\n", 7));
  m = refusal([] { cuinline::detail::template_text("ew_nary.cuh"); });
  EXPECT_NE(m.find("NUL"), std::string::npos) << m;
}

// A template in a subfolder is overridden by the same path; the subfolder is held to the directory's
// rules (a symlink is not followed, others may not write it); a name cannot climb out.
TEST_F(TemplateDir, ASubfolderTemplateIsOverriddenAndItsFolderChecked) {
  ASSERT_EQ(::mkdir(path("arch").c_str(), 0700), 0);
  write("arch/mma_sm80.cuh", "// overridden mma\n");
  EXPECT_EQ(cuinline::detail::template_text("arch/mma_sm80.cuh"), "// overridden mma\n");
  EXPECT_NE(cuinline::detail::template_text("arch/copy_sm80.cuh").find("cp.async"), std::string::npos);
  // conv2d_hmma.cuh's program headers follow its includes into the subfolders.
  const auto headers = cuinline::detail::template_headers({"conv2d_hmma.cuh"});
  bool mma = false, plan = false;
  for (const cuinline::Header& h : headers) {
    mma = mma || (h.name == "arch/mma_sm80.cuh" && h.content == "// overridden mma\n");
    plan = plan || (h.name == "conv2d_hmma/plan.cuh" && h.content.find("struct Plan") != std::string::npos);
  }
  EXPECT_TRUE(mma && plan) << headers.size() << " headers";

  ASSERT_EQ(::chmod(path("arch").c_str(), 0777), 0);
  std::string m = refusal([] { cuinline::detail::template_text("arch/mma_sm80.cuh"); });
  EXPECT_NE(m.find("'" + path("arch") + "'"), std::string::npos) << m;
  EXPECT_NE(m.find("writable by group or others (mode 0777)"), std::string::npos) << m;
  ASSERT_EQ(::chmod(path("arch").c_str(), 0700), 0);

  ASSERT_EQ(::mkdir(path("elsewhere").c_str(), 0700), 0);
  write("elsewhere/plan.cuh", "// planted\n");
  ASSERT_EQ(::symlink(path("elsewhere").c_str(), path("conv2d_hmma").c_str()), 0);
  m = refusal([] { cuinline::detail::template_text("conv2d_hmma/plan.cuh"); });
  EXPECT_NE(m.find("symbolic link"), std::string::npos) << m;

  write("ew_ops.cuh", "// not a folder\n");
  m = refusal([] { cuinline::detail::template_text("ew_ops.cuh/x.cuh"); });
  EXPECT_NE(m.find("not a directory"), std::string::npos) << m;
  for (const char* bad : {"../ew_ops.cuh", "arch/../ew_ops.cuh", "/etc/hostname", "arch//mma_sm80.cuh", "./ew_ops.cuh"}) {
    m = refusal([bad] { cuinline::detail::template_text(bad); });
    EXPECT_NE(m.find("no kernel template named"), std::string::npos) << bad << ": " << m;
  }
}

}  // namespace
