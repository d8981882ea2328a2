#include <gtest/gtest.h>

#include <cuinline/arch.hpp>
#include <cuinline/error.hpp>
#include <string>

namespace cuinline {
namespace {

TEST(Arch, ParsesRealVirtualAndBareSpellings) {
  EXPECT_EQ(Arch::parse("sm_90"), (Arch{9, 0, '\0'}));
  EXPECT_EQ(Arch::parse("sm_90a"), (Arch{9, 0, 'a'}));
  EXPECT_EQ(Arch::parse("sm_100f"), (Arch{10, 0, 'f'}));
  EXPECT_EQ(Arch::parse("sm_121"), (Arch{12, 1, '\0'}));
  EXPECT_EQ(Arch::parse("compute_90"), (Arch{9, 0, '\0'}));
  EXPECT_EQ(Arch::parse("compute_100a"), (Arch{10, 0, 'a'}));
  EXPECT_EQ(Arch::parse("90"), (Arch{9, 0, '\0'}));
  EXPECT_EQ(Arch::parse("75"), (Arch{7, 5, '\0'}));
}

TEST(Arch, NamesRoundTrip) {
  for (const char* text : {"sm_75", "sm_90", "sm_90a", "sm_100f", "sm_103a", "sm_121"}) {
    const Arch arch = Arch::parse(text);
    EXPECT_EQ(arch.name(), text);
    EXPECT_EQ(Arch::parse(arch.name()), arch);
    EXPECT_EQ(Arch::parse(arch.virtual_name()), arch);
  }
  EXPECT_EQ(Arch::parse("sm_90a").virtual_name(), "compute_90a");
  EXPECT_EQ(Arch::parse("compute_100").name(), "sm_100");
  EXPECT_EQ(Arch::parse("sm_100").number(), 100);
}

TEST(Arch, RejectsMalformedStringsNamingThem) {
  for (const char* text :
       {"sm90",  "sm_1000", "sm_9",   "",      "sm_9x", "sm_", "sm_90b", "sm_90aa", "compute90", "sm_-90",
        "SM_90", " sm_90",  "sm_90 ", "sm_09", "1000",  "9",   "a",      "sm_a",    "gfx90a",    "sm_9.0"}) {
    try {
      Arch::parse(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(text) + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Arch, OrdersByNumberThenSuffix) {
  EXPECT_LT(Arch::parse("sm_89"), Arch::parse("sm_90"));
  EXPECT_LT(Arch::parse("sm_90"), Arch::parse("sm_90a"));
  EXPECT_LT(Arch::parse("sm_90a"), Arch::parse("sm_100"));
  EXPECT_NE(Arch::parse("sm_100a"), Arch::parse("sm_100f"));
}

}  // namespace
}  // namespace cuinline
