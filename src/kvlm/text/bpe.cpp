// BPE model: byte-level (GPT-2, Llama 3, Qwen) and SentencePiece-style (byte_fallback, fuse_unk)
// vocabularies. Merging uses a priority queue over adjacent pairs (lowest merge rank first, then
// leftmost), so a word of n symbols costs O(n log n); results of short words are cached.
#include <bit>
#include <mutex>
#include <queue>
#include <shared_mutex>

#include "kvlm/base/error.h"
#include "kvlm/text/components.h"
#include "kvlm/text/unicode.h"
#include "kvlm/text/vocab.h"

namespace kvlm::text {

namespace {

// Thread-safe cache of word -> ids, split into shards to keep lock contention low. Each shard
// is cleared when full (like HF's cache, it simply stops growing without bound).
class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 256;
  bool get(std::string_view word, std::vector<int32_t>& out) const {
    const Shard& s = shard(word);
    std::shared_lock lock(s.mu);
    auto it = s.map.find(word);
    if (it == s.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void put(std::string_view word, std::vector<int32_t> ids) const {
    Shard& s = shard(word);
    std::unique_lock lock(s.mu);
    if (s.map.size() >= kShardCapacity) s.map.clear();
    s.map.emplace(std::string(word), std::move(ids));
  }

 private:
  static constexpr size_t kShards = 16, kShardCapacity = 4096;
  struct Shard {
    mutable std::shared_mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  Shard& shard(std::string_view w) const { return shards_[StringHash{}(w) % kShards]; }
  mutable std::array<Shard, kShards> shards_;
};

struct MergeInfo {
  int32_t rank;
  int32_t new_id;
};

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Open-addressing hash table from a token pair to its merge. Pair lookups are the inner loop of
// BPE; a flat power-of-two table with linear probing avoids the pointer chasing of
// std::unordered_map.
class MergeTable {
 public:
  void build(const std::vector<std::pair<uint64_t, MergeInfo>>& entries) {
    size_t cap = 16;
    while (cap < entries.size() * 2) cap <<= 1;
    shift_ = 64 - static_cast<int>(std::countr_zero(cap));
    slots_.assign(cap, Slot{kEmpty, {}});
    for (const auto& [key, info] : entries) {
      size_t i = index(key);
      while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & (cap - 1);
      slots_[i] = {key, info};  // a repeated pair keeps its last rank, as HF's map does
    }
  }
  const MergeInfo* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = index(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return &slots_[i].info;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  bool empty() const { return slots_.empty(); }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // ids are below 2^30, so no pair has this key
  struct Slot {
    uint64_t key;
    MergeInfo info;
  };
  size_t index(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::vector<Slot> slots_;
  int shift_ = 60;
};

class Bpe : public Model {
 public:
  Bpe(const Json& j, const std::string& origin) {
    const Json& vocab = json_get<Json>(j, "vocab", origin);
    check(vocab.is_object(), origin + ": field 'vocab' must be an object of token -> id");
    for (const auto& [tok, id] : vocab.items()) {
      check(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (1 << 30),
            origin + ": vocab id of '" + tok + "' is not a valid id (" + id.dump() + ")");
      vocab_.add(tok, id.get<int32_t>());
    }
    load_merges(json_get_or<Json>(j, "merges", Json::array(), origin), origin);
    if (auto unk = json_get_or<std::string>(j, "unk_token", "", origin); !unk.empty()) {
      unk_id_ = vocab_.find(unk);
      check(unk_id_.has_value(), origin + ": unk_token '" + unk + "' is not in the vocab");
    }
    prefix_ = json_get_or<std::string>(j, "continuing_subword_prefix", "", origin);
    suffix_ = json_get_or<std::string>(j, "end_of_word_suffix", "", origin);
    fuse_unk_ = json_get_or<bool>(j, "fuse_unk", false, origin);
    byte_fallback_ = json_get_or<bool>(j, "byte_fallback", false, origin);
    ignore_merges_ = json_get_or<bool>(j, "ignore_merges", false, origin);
    check(json_get_or<double>(j, "dropout", 0.0, origin) == 0.0,
          origin + ": BPE dropout is not supported (it makes encoding random)");
    if (byte_fallback_)
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        byte_ids_[static_cast<size_t>(b)] = vocab_.find(name).value_or(-1);
      }
  }

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    if (word.empty()) return;
    if (ignore_merges_)
      if (auto id = vocab_.find(word)) {
        out.push_back(*id);
        return;
      }
    bool cacheable = word.size() <= WordCache::kMaxWordBytes;
    if (cacheable && cache_.get(word, out)) return;
    std::vector<int32_t> ids = merge_word(word);
    out.insert(out.end(), ids.begin(), ids.end());
    if (cacheable) cache_.put(word, std::move(ids));
  }

  std::optional<int32_t> token_to_id(std::string_view t) const override { return vocab_.find(t); }
  const std::string* id_to_token(int32_t id) const override { return vocab_.token(id); }
  int32_t size() const override { return vocab_.size(); }

 private:
  void load_merges(const Json& merges, const std::string& origin) {
    check(merges.is_array(), origin + ": field 'merges' must be an array");
    std::vector<std::pair<uint64_t, MergeInfo>> entries;
    entries.reserve(merges.size());
    int32_t rank = 0;
    for (const Json& m : merges) {
      std::string a, b;
      if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        check(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
              origin + ": merge " + std::to_string(rank) + " is not two tokens: " + m.dump());
        a = s.substr(0, sp), b = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        a = m[0].get<std::string>(), b = m[1].get<std::string>();
      } else {
        throw Error(origin + ": merge " + std::to_string(rank) + " is not two tokens: " + m.dump());
      }
      auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b);
      check(ia && ib && im, origin + ": merge " + std::to_string(rank) + " (" + m.dump() +
                                ") uses a token that is not in the vocab");
      entries.emplace_back(pair_key(*ia, *ib), MergeInfo{rank, *im});
      ++rank;
    }
    if (!entries.empty()) merges_.build(entries);
  }

  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };

  // Initial symbols of a word: one per character (with prefix/suffix), byte tokens for unknown
  // characters when byte_fallback is on, else (fused) unk.
  std::vector<int32_t> initial_ids(std::string_view w) const {
    std::vector<int32_t> ids;
    ids.reserve(w.size());
    bool pending_unk = false;
    for (size_t i = 0; i < w.size();) {
      size_t start = i;
      next_code_point(w, i);
      std::string s;
      if (start > 0) s += prefix_;
      s.append(w.substr(start, i - start));
      if (i == w.size()) s += suffix_;
      if (auto id = vocab_.find(s)) {
        if (pending_unk) ids.push_back(*unk_id_), pending_unk = false;
        ids.push_back(*id);
        continue;
      }
      if (byte_fallback_ && add_bytes(s, ids)) continue;  // HF leaves a pending unk pending here
      if (unk_id_) {
        if (pending_unk && !fuse_unk_) ids.push_back(*unk_id_);
        pending_unk = true;
      }
    }
    if (pending_unk) ids.push_back(*unk_id_);
    return ids;
  }

  bool add_bytes(std::string_view s, std::vector<int32_t>& ids) const {
    for (unsigned char b : s)
      if (byte_ids_[b] < 0) return false;
    for (unsigned char b : s) ids.push_back(byte_ids_[b]);
    return true;
  }

  std::vector<int32_t> merge_word(std::string_view w) const {
    std::vector<int32_t> ids = initial_ids(w);
    if (ids.size() < 2 || merges_.empty()) return ids;
    std::vector<Symbol> sym(ids.size());
    for (size_t k = 0; k < ids.size(); ++k)
      sym[k] = {ids[k], static_cast<int32_t>(k) - 1,
                k + 1 < ids.size() ? static_cast<int32_t>(k + 1) : -1, true};
    // A candidate remembers the pair it was made for; it is stale once either symbol changed.
    struct Cand {
      int32_t rank, pos, new_id, left_id, right_id;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::vector<Cand> heap_storage;
    heap_storage.reserve(sym.size());
    std::priority_queue<Cand, std::vector<Cand>, std::greater<>> queue(std::greater<>{},
                                                                       std::move(heap_storage));
    auto push_pair = [&](int32_t pos) {
      if (pos < 0) return;
      int32_t nx = sym[static_cast<size_t>(pos)].next;
      if (nx < 0) return;
      int32_t a = sym[static_cast<size_t>(pos)].id, b = sym[static_cast<size_t>(nx)].id;
      if (const MergeInfo* m = merges_.find(pair_key(a, b)))
        queue.push({m->rank, pos, m->new_id, a, b});
    };
    for (int32_t k = 0; k + 1 < static_cast<int32_t>(sym.size()); ++k) push_pair(k);
    while (!queue.empty()) {
      Cand top = queue.top();
      queue.pop();
      Symbol& left = sym[static_cast<size_t>(top.pos)];
      if (!left.alive || left.next < 0 || left.id != top.left_id) continue;
      Symbol& right = sym[static_cast<size_t>(left.next)];
      if (right.id != top.right_id) continue;  // stale entry
      left.id = top.new_id;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = top.pos;
      push_pair(left.prev);
      push_pair(top.pos);
    }
    std::vector<int32_t> out;
    for (int32_t k = 0; k >= 0; k = sym[static_cast<size_t>(k)].next)
      out.push_back(sym[static_cast<size_t>(k)].id);
    return out;
  }

  Vocab vocab_;
  MergeTable merges_;
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};
  WordCache cache_;
};

}  // namespace

std::unique_ptr<Model> make_bpe_model(const Json& j, const std::string& origin) {
  return std::make_unique<Bpe>(j, origin);
}

}  // namespace kvlm::text
