// safetensors reading and writing: round trips, layout, and one exact error per kind of bad file.
#include "kvlm/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io_test_util.h"
#include "kvlm/base/half.h"
#include "kvlm/io/safetensors_writer.h"

namespace kvlm {
namespace {

using testing::error_of;
using testing::TempDir;

std::string parse_error(const std::string& image) {
  return error_of([&] {
    parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "f.safetensors");
  });
}

SafetensorsHeader parse(const std::string& image) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "f");
}

TEST(SafetensorsWriter, RoundTripKeepsValuesShapesAndMetadata) {
  TempDir tmp;
  Tensor a = Tensor::from_f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::empty({3}, DType::kBF16);
  for (int i = 0; i < 3; ++i) b.data<uint16_t>()[i] = f32_to_bf16(float(i) - 0.5f);
  Tensor c = Tensor::zeros({0, 4}, DType::kU32);
  SafetensorsWriter w("mlx");
  w.add("a", a);
  w.add("b", b);
  w.add("c", c);
  w.add_bytes("scalar", DType::kI32, {}, std::string("\x07\0\0\0", 4));
  w.set_metadata("note", "x");
  w.write(tmp.file("t.safetensors"));

  auto f = SafetensorsFile::open(tmp.file("t.safetensors"));
  const auto& h = f->header();
  ASSERT_EQ(h.tensors.size(), 4u);
  EXPECT_EQ(h.tensors[0].name, "a");  // sorted by name
  EXPECT_EQ(h.metadata["format"], "mlx");
  EXPECT_EQ(h.metadata["note"], "x");
  EXPECT_EQ(f->tensor("a").to_f32_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(f->tensor("a").shape(), (Shape{2, 3}));
  EXPECT_EQ(f->tensor("b").to_f32_vector(), (std::vector<float>{-0.5f, 0.5f, 1.5f}));
  EXPECT_EQ(f->tensor("c").shape(), (Shape{0, 4}));
  EXPECT_EQ(f->tensor("scalar").shape(), Shape{});
  EXPECT_EQ(f->tensor("scalar").data<int32_t>()[0], 7);
  // The serialized image and the written file agree byte for byte.
  EXPECT_EQ(w.serialize(), read_file(tmp.file("t.safetensors")));
}

TEST(SafetensorsWriter, LayoutIsAlignedAndContiguous) {
  SafetensorsWriter w;
  w.add_bytes("u8", DType::kU8, {3}, "abc");
  w.add("f32", Tensor::from_f32({1, 2}, {2}));
  w.add_bytes("i64", DType::kI64, {1}, std::string(8, '\1'));
  w.add("bf16", Tensor::zeros({1}, DType::kBF16));
  const std::string img = w.serialize();
  const auto h = parse(img);
  EXPECT_EQ(h.data_start % 8, 0u);
  size_t end = h.data_start;
  // Largest elements first: i64, f32, bf16, u8, each starting where the previous ended.
  const std::vector<std::string> order{"i64", "f32", "bf16", "u8"};
  for (const std::string& n : order) {
    const SafetensorsEntry* e = h.find(n);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->offset, end) << n;
    EXPECT_EQ(e->offset % dtype_size(e->dtype), 0u) << n;
    end = e->offset + e->nbytes;
  }
  EXPECT_EQ(end, img.size());
}

TEST(SafetensorsWriter, NonContiguousTensorIsWrittenRowMajor) {
  Tensor t = Tensor::from_f32({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3}).slice(1, 1, 3);  // [3, 2]
  SafetensorsWriter w;
  w.add("s", t);
  const std::string img = w.serialize();
  const auto h = parse(img);
  std::vector<float> got(6);
  std::memcpy(got.data(), img.data() + h.find("s")->offset, 24);
  EXPECT_EQ(got, (std::vector<float>{1, 2, 4, 5, 7, 8}));
}

TEST(SafetensorsWriter, RejectsDuplicatesAndWrongByteCounts) {
  SafetensorsWriter w;
  w.add("x", Tensor::from_f32({1}, {1}));
  EXPECT_EQ(error_of([&] { w.add("x", Tensor::from_f32({1}, {1})); }),
            "safetensors writer: duplicate tensor 'x'");
  EXPECT_EQ(error_of([&] { w.add_bytes("y", DType::kF32, {2}, "abc"); }),
            "safetensors writer: tensor 'y' has 3 bytes for f32[2]");
}

TEST(SafetensorsFile, TensorsAreViewsOfTheMapNotCopies) {
  TempDir tmp;
  SafetensorsWriter w;
  w.add("x", Tensor::from_f32({1, 2, 3, 4}, {4}));
  w.write(tmp.file("x.safetensors"));
  Tensor t;
  {
    auto f = SafetensorsFile::open(tmp.file("x.safetensors"));
    t = f->tensor("x");
    EXPECT_EQ(f->tensor("x").raw(), t.raw());  // same mapped bytes, no copy
    EXPECT_EQ(f->file_size(), w.serialize().size());
  }
  // The tensor keeps the file mapped after the file handle is gone.
  EXPECT_EQ(t.to_f32_vector(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(SafetensorsFile, MisalignedTensorIsCopiedToAlignedMemory) {
  TempDir tmp;
  std::string data(1, '\x09');
  float v[2] = {1.5f, -2.0f};
  data.append(reinterpret_cast<const char*>(v), 8);
  const std::string header =
      R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
      R"("f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  write_file(tmp.file("m.safetensors"), safetensors_image(header, data));
  auto f = SafetensorsFile::open(tmp.file("m.safetensors"));
  Tensor t = f->tensor("f");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 4, 0u);
  EXPECT_EQ(t.to_f32_vector(), (std::vector<float>{1.5f, -2.0f}));
}

TEST(SafetensorsFile, MissingTensorAndMissingFile) {
  TempDir tmp;
  SafetensorsWriter w;
  w.add("x", Tensor::from_f32({1}, {1}));
  w.write(tmp.file("x.safetensors"));
  auto f = SafetensorsFile::open(tmp.file("x.safetensors"));
  EXPECT_EQ(error_of([&] { f->tensor("y"); }), tmp.file("x.safetensors") + ": missing tensor 'y'");
  EXPECT_EQ(error_of([&] { SafetensorsFile::open(tmp.file("none.safetensors")); }),
            tmp.file("none.safetensors") + ": cannot open file: No such file or directory");
}

TEST(SafetensorsBadInput, TruncatedFile) {
  TempDir tmp;
  SafetensorsWriter w;
  w.add("model.embed_tokens.weight", Tensor::zeros({32, 64}, DType::kBF16));
  const std::string img = w.serialize();
  const std::string path = tmp.file("cut.safetensors");
  write_file(path, img.substr(0, img.size() - 100));
  EXPECT_EQ(error_of([&] { SafetensorsFile::open(path); }),
            path + ": tensor 'model.embed_tokens.weight' data_offsets [0, 4096] run past the data "
                   "section (3996 bytes)");
  // Cut inside the header, and before the length prefix ends.
  EXPECT_EQ(parse_error(img.substr(0, 100)),
            "f.safetensors: truncated file: header says " + std::to_string(parse(img).data_start - 8) +
                " bytes but file has 100");
  EXPECT_EQ(parse_error(img.substr(0, 3)),
            "f.safetensors: truncated file: 3 bytes, too short for the 8-byte header length");
  EXPECT_EQ(parse_error(""),
            "f.safetensors: truncated file: 0 bytes, too short for the 8-byte header length");
}

TEST(SafetensorsBadInput, HeaderLengthLies) {
  std::string img = safetensors_image("{}", std::string(90, '\0'));
  const uint64_t lie = 1234;
  std::memcpy(img.data(), &lie, 8);
  EXPECT_EQ(parse_error(img), "f.safetensors: truncated file: header says 1234 bytes but file has 100");
  uint64_t huge = ~uint64_t(0);
  std::memcpy(img.data(), &huge, 8);
  EXPECT_EQ(parse_error(img), "f.safetensors: truncated file: header says 18446744073709551615 "
                              "bytes but file has 100");
}

TEST(SafetensorsBadInput, OffsetsDisagreeWithShape) {
  const std::string h =
      R"({"model.embed_tokens.weight":{"dtype":"BF16","shape":[32,64],"data_offsets":[0,100]}})";
  EXPECT_EQ(parse_error(safetensors_image(h, std::string(4096, '\0'))),
            "f.safetensors: tensor 'model.embed_tokens.weight' data_offsets [0, 100] need 4096 "
            "bytes for bf16[32, 64]");
}

TEST(SafetensorsBadInput, OffsetsPastTheData) {
  const std::string h = R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})";
  EXPECT_EQ(parse_error(safetensors_image(h, std::string(16, '\0'))),
            "f.safetensors: tensor 'x' data_offsets [16, 32] run past the data section (16 bytes)");
}

TEST(SafetensorsBadInput, UnknownDtype) {
  const std::string h = R"({"x":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})";
  EXPECT_EQ(parse_error(safetensors_image(h, std::string(4, '\0'))),
            "f.safetensors: unknown dtype 'F8_E4M3' for tensor 'x'");
}

TEST(SafetensorsBadInput, MalformedFields) {
  auto err = [](const std::string& entry) {
    return parse_error(safetensors_image(R"({"x":)" + entry + "}", std::string(64, '\0')));
  };
  EXPECT_EQ(err(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"),
            "f.safetensors: tensor 'x' has an invalid shape [-1] (need a list of non-negative "
            "integers)");
  EXPECT_EQ(err(R"({"dtype":"F32","shape":[1.0],"data_offsets":[0,4]})"),
            "f.safetensors: tensor 'x' has an invalid shape [1.0] (need a list of non-negative "
            "integers)");
  EXPECT_EQ(err(R"({"dtype":"F32","shape":"4","data_offsets":[0,4]})"),
            "f.safetensors: tensor 'x' has an invalid shape \"4\" (need a list of non-negative "
            "integers)");
  EXPECT_EQ(err(R"({"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]})"),
            "f.safetensors: tensor 'x' has 9 dimensions (at most 8 are supported)");
  EXPECT_EQ(err(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"),
            "f.safetensors: tensor 'x' has invalid data_offsets [8,4] (need [begin, end], begin "
            "<= end)");
  EXPECT_EQ(err(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"),
            "f.safetensors: tensor 'x' has invalid data_offsets [0] (need [begin, end], begin <= "
            "end)");
  EXPECT_EQ(err(R"({"shape":[1],"data_offsets":[0,4]})"),
            "f.safetensors: tensor 'x' has no string field 'dtype'");
  EXPECT_EQ(err(R"({"dtype":"F32","data_offsets":[0,4]})"),
            "f.safetensors: tensor 'x' has no field 'shape'");
  EXPECT_EQ(err(R"({"dtype":"F32","shape":[1]})"),
            "f.safetensors: tensor 'x' has no field 'data_offsets'");
  EXPECT_EQ(err(R"([1,2])"), "f.safetensors: tensor 'x' is not a JSON object");
  EXPECT_EQ(err(R"({"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,4]})"),
            "f.safetensors: tensor 'x' shape [4611686018427387904, 8] is too large");
  // Empty, but its other dimensions still overflow any stride computation.
  EXPECT_EQ(err(R"({"dtype":"U8","shape":[0,2,4611686018427387904],"data_offsets":[0,0]})"),
            "f.safetensors: tensor 'x' shape [0, 2, 4611686018427387904] is too large");
  EXPECT_EQ(parse(safetensors_image(R"({"x":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]}})", ""))
                .tensors[0].nbytes, 0u);
}

TEST(SafetensorsBadInput, HeaderNotJsonOrNotObject) {
  EXPECT_EQ(parse_error(safetensors_image("[]", "")),
            "f.safetensors: safetensors header is not a JSON object");
  EXPECT_EQ(parse_error(safetensors_image(R"({"__metadata__":[]})", "")),
            "f.safetensors: __metadata__ is not a JSON object");
  EXPECT_EQ(parse_error(safetensors_image(R"({"x":)", "")),
            "f.safetensors: safetensors header: invalid JSON at byte 6: syntax error while parsing "
            "value - unexpected end of input; expected '[', '{', or a literal");
}

// Found by fuzz_safetensors: nlohmann reports an overflowing number as out_of_range, not as a
// parse error.
TEST(SafetensorsBadInput, NumberTooLargeForJson) {
  EXPECT_EQ(parse_error(safetensors_image(R"({"x":{"dtype":"F32","shape":[1e999]}})", "")),
            "f.safetensors: safetensors header: invalid JSON: number overflow parsing '1e999'");
}

TEST(SafetensorsHeader, EmptyFileWithMetadataOnly) {
  const auto h = parse(safetensors_image(R"({"__metadata__":{"format":"pt"}})", ""));
  EXPECT_TRUE(h.tensors.empty());
  EXPECT_EQ(h.metadata["format"], "pt");
  EXPECT_EQ(h.find("x"), nullptr);
}

}  // namespace
}  // namespace kvlm
