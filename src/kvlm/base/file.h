#pragma once
// Whole-file reads and read-only memory maps.
#include <cstddef>
#include <cstdint>
#include <string>

namespace kvlm {

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

// A read-only, private memory map of a whole file. Pages are read lazily by the kernel, so
// mapping a checkpoint costs nothing until a weight is touched.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the whole pages inside bytes [offset, offset + n) from the process's resident set
  // (madvise MADV_DONTNEED), for data copied elsewhere: the map is read-only and backed by the
  // file, so a later read faults the same bytes back in from the page cache.
  void release(size_t offset, size_t n) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvlm
