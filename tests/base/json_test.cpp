#include "kvlm/base/json.h"

#include <gtest/gtest.h>

namespace kvlm {

TEST(Json, ErrorsNameOriginAndField) {
  Json j = parse_json(R"({"a": 1, "b": "x"})", "config.json");
  EXPECT_EQ(json_get<int>(j, "a", "config.json"), 1);
  EXPECT_EQ(json_get_or<int>(j, "z", 7, "config.json"), 7);
  try {
    json_get<int>(j, "hidden_size", "config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: missing required field 'hidden_size'");
  }
  try {
    json_get<int>(j, "b", "config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: field 'b' has the wrong type (\"x\")");
  }
  EXPECT_THROW(parse_json("{", "x.json"), Error);
}

}  // namespace kvlm

namespace kvlm {

TEST(Json, NumberOutOfRangeIsACleanError) {
  try {
    parse_json("[1e999]", "x.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("x.json: invalid JSON", 0), 0u) << e.what();
  }
}

}  // namespace kvlm
