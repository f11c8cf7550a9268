#include "kvlm/engine/stop_strings.h"

#include <gtest/gtest.h>

#include "kvlm/base/error.h"

namespace kvlm {
namespace {

TEST(StopStrings, HoldsBackAPossibleStartThenCutsAtTheStop) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.push("xE"), "x");   // "E" may begin "END"
  EXPECT_EQ(m.push("N"), "");     // "EN" too
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("D more"), "");  // the stop string and everything after it are dropped
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("later"), "");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopStrings, StopInsideOneChunk) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(m.push("abENDcd"), "ab");
  EXPECT_TRUE(m.stopped());
}

TEST(StopStrings, FalseAlarmReleasesHeldText) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(m.push("E"), "");
  EXPECT_EQ(m.push("X"), "EX");
  EXPECT_EQ(m.push("EN"), "");
  EXPECT_EQ(m.finish(), "EN");  // the stream ended before the stop could complete
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, SeveralStopsTheEarliestWins) {
  StopStringMatcher m({"\n\n", "###"});
  EXPECT_EQ(m.push("a\n#"), "a\n");  // "#" may begin "###"; "\n#" begins nothing
  EXPECT_EQ(m.push("##b"), "");
  EXPECT_TRUE(m.stopped());
  StopStringMatcher earliest({"b", "abc"});
  EXPECT_EQ(earliest.push("xabc"), "x");  // "abc" starts before "b"
}

TEST(StopStrings, LongestPossiblePrefixIsHeld) {
  StopStringMatcher m({"aab"});
  EXPECT_EQ(m.push("xaa"), "x");  // both "a" and "aa" could begin "aab"; hold "aa"
  EXPECT_EQ(m.push("a"), "a");    // "aaa": only the last "aa" can still begin it
  EXPECT_EQ(m.push("b"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopStrings, NoStopsPassEverything) {
  StopStringMatcher m({});
  EXPECT_EQ(m.push("anything"), "anything");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopStrings, EmptyStopIsAnError) { EXPECT_THROW(StopStringMatcher({"ok", ""}), Error); }

}  // namespace
}  // namespace kvlm
