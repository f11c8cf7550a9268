#include "kvlm/engine/engine_flags.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kvlm/base/error.h"

namespace kvlm {
namespace {

TEST(ParseByteSize, AcceptsCountsAndBinarySuffixes) {
  EXPECT_EQ(parse_byte_size("0"), 0);
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("512K"), 512 << 10);
  EXPECT_EQ(parse_byte_size("512M"), int64_t(512) << 20);
  EXPECT_EQ(parse_byte_size("2G"), int64_t(2) << 30);
  EXPECT_EQ(parse_byte_size("2g"), int64_t(2) << 30);
  EXPECT_EQ(parse_byte_size("2GB"), int64_t(2) << 30);
  EXPECT_EQ(parse_byte_size("2GiB"), int64_t(2) << 30);
  EXPECT_EQ(parse_byte_size("1.5G"), int64_t(3) << 29);
  EXPECT_EQ(parse_byte_size("1T"), int64_t(1) << 40);
}

TEST(ParseByteSize, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "G", "-1", "12X", "1.5.5G", "2 G", "nan", "1e30"})
    EXPECT_THROW(parse_byte_size(bad), Error) << bad;
  try {
    parse_byte_size("lots");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "'lots' is not a size (a byte count, or a number with K, M, G or T)");
  }
}

struct Parsed {
  EngineOptions engine;
  ModelLoadOptions load;
};

Parsed parse(std::vector<std::string> args) {
  CLI::App app;
  Parsed p;
  add_engine_options(app, p.engine, p.load);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments back to front
  app.parse(args);
  return p;
}

TEST(EngineFlags, DefaultsAndEveryFlag) {
  const Parsed d = parse({});
  EXPECT_EQ(d.engine.max_batch, 8);
  EXPECT_EQ(d.engine.prompt_cache_bytes, -1);
  EXPECT_EQ(d.load.kv_budget_bytes, 0);
  const Parsed p = parse({"--max-batch", "3", "--prefill-chunk", "64", "--token-budget", "256",
                          "--kv-budget", "512M", "--prompt-cache-bytes", "0"});
  EXPECT_EQ(p.engine.max_batch, 3);
  EXPECT_EQ(p.engine.prefill_chunk, 64);
  EXPECT_EQ(p.engine.token_budget, 256);
  EXPECT_EQ(p.load.kv_budget_bytes, int64_t(512) << 20);
  EXPECT_EQ(p.engine.prompt_cache_bytes, 0);
}

TEST(EngineFlags, MlxBunAliasesForMaxBatch) {
  EXPECT_EQ(parse({"--batch", "5"}).engine.max_batch, 5);
  EXPECT_EQ(parse({"--decode-concurrency", "6"}).engine.max_batch, 6);
}

TEST(EngineFlags, BadValuesAreRefused) {
  EXPECT_THROW(parse({"--max-batch", "0"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--kv-budget", "lots"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--prompt-cache-bytes", "-5"}), CLI::ValidationError);
}

TEST(EngineFlags, WeightLayout) {
  EXPECT_TRUE(parse({}).load.panel_weights);
  EXPECT_TRUE(parse({"--weight-layout", "panels"}).load.panel_weights);
  EXPECT_FALSE(parse({"--weight-layout", "rows"}).load.panel_weights);
  try {
    parse({"--weight-layout", "columns"});
    ADD_FAILURE() << "--weight-layout columns was accepted";
  } catch (const CLI::ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown value 'columns' (expected panels or rows)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvlm
