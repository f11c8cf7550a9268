#pragma once
// The continuous-batching scheduler (DESIGN.md §3): which sequences run, and what each feeds into
// the next forward pass. It owns the waiting queue, the running set and the prefix cache, and it
// keeps the memory promise: a request is admitted only when the pool can hold everything it may
// grow to, so a running sequence never runs out of blocks and nothing is ever preempted.
//
// Block accounting. At admission a request reserves ceil(reserve_tokens / block_size) blocks,
// minus the prefix-cache blocks it starts from (those already exist and are never written again,
// since a shared prefix always ends on a block boundary). The invariant
//     pool free blocks >= sum over running requests of (reserved - allocated so far)
// holds between steps: admission checks it, and every block a running sequence allocates comes
// out of its own reservation. Blocks held only by the prefix cache are not free; the cache is
// evicted (LRU) when the head of the queue needs them.
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "kvlm/engine/engine.h"
#include "kvlm/engine/request.h"
#include "kvlm/kv/prefix_cache.h"
#include "kvlm/model/model.h"

namespace kvlm {

// One forward pass: the flattened batch and, per sequence in it, where its logits row is.
struct StepPlan {
  Batch batch;
  std::vector<Request*> seqs;       // batch.seqs order
  std::vector<int32_t> logits_row;  // per sequence: its row of the logits, or -1 (mid-prefill)
  bool empty() const { return seqs.empty(); }
};

struct PrefixStats {
  int64_t hits = 0, misses = 0, cached_tokens = 0;
};

class Scheduler {
 public:
  // Error if the options are out of range (non-positive sizes, token_budget < max_batch).
  // `context_limit` is the model's max_position_embeddings, for error messages.
  Scheduler(KVPool& pool, const EngineOptions& opts, int64_t context_limit);
  ~Scheduler();

  // Blocks a sequence of `tokens` tokens occupies.
  int32_t blocks_for(int64_t tokens) const;
  // Error naming the numbers when `r` could not run even in an empty pool.
  void check_fits(const Request& r) const;

  void enqueue(std::unique_ptr<Request> r);
  // Moves waiting requests into the running set, FIFO, while there is room (max_batch) and
  // memory; the head of the queue waits (and blocks those behind it) until it fits.
  void admit();
  // This step's work: one token for every decoding sequence, then prefill chunks (at most
  // prefill_chunk tokens each) in admission order under the token budget.
  StepPlan plan() const;
  // After a successful forward: offers freshly completed prompts to the prefix cache, so that
  // requests arriving while this one still decodes can share its prompt.
  void publish_prompts(const StepPlan& plan);
  // Removes finished requests from the running set and the queue; their KV goes to the prefix
  // cache (unless the request failed) and the sequence is cleared.
  std::vector<std::unique_ptr<Request>> retire_finished();

  Request* find(RequestId id);
  const std::vector<std::unique_ptr<Request>>& running() const { return running_; }
  const std::deque<std::unique_ptr<Request>>& waiting() const { return waiting_; }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }

  // Free blocks not promised to running sequences.
  int32_t available_blocks() const;
  const PrefixCache& prefix_cache() const { return cache_; }
  const PrefixStats& prefix_stats() const { return prefix_stats_; }

 private:
  bool try_admit(Request& r);
  void hand_off(Request& r);

  KVPool& pool_;
  EngineOptions opts_;
  int64_t context_limit_;
  PrefixCache cache_;
  PrefixStats prefix_stats_;
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> running_;  // admission order
};

}  // namespace kvlm
