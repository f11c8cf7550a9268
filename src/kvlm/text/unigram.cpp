// Unigram model (SentencePiece unigram, e.g. T5): the segmentation with the highest total piece
// score, found by Viterbi over every vocabulary piece that starts at each character.
#include <cfloat>

#include "kvlm/base/error.h"
#include "kvlm/text/components.h"
#include "kvlm/text/unicode.h"
#include "kvlm/text/vocab.h"

namespace kvlm::text {

namespace {

// SentencePiece scores an unknown character as the worst piece minus this penalty.
constexpr double kUnkPenalty = 10.0;

class Unigram : public Model {
 public:
  Unigram(const Json& j, const std::string& origin) {
    const Json& vocab = json_get<Json>(j, "vocab", origin);
    check(vocab.is_array(), origin + ": Unigram field 'vocab' must be a list of [piece, score]");
    double min_score = DBL_MAX;
    for (const Json& e : vocab) {
      check(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_number(),
            origin + ": Unigram vocab entry " + std::to_string(scores_.size()) +
                " is not [piece, score]: " + e.dump().substr(0, 80));
      std::string piece = e[0].get<std::string>();
      max_piece_bytes_ = std::max(max_piece_bytes_, piece.size());
      vocab_.add(std::move(piece), static_cast<int32_t>(scores_.size()));
      scores_.push_back(e[1].get<double>());
      min_score = std::min(min_score, scores_.back());
    }
    if (j.contains("unk_id") && !j.at("unk_id").is_null()) {
      int64_t u = json_get<int64_t>(j, "unk_id", origin);
      check(u >= 0 && u < static_cast<int64_t>(scores_.size()),
            origin + ": unk_id " + std::to_string(u) + " is outside the vocab");
      unk_id_ = static_cast<int32_t>(u);
    }
    byte_fallback_ = json_get_or<bool>(j, "byte_fallback", false, origin);
    unk_score_ = (scores_.empty() ? 0.0 : min_score) - kUnkPenalty;
  }

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    for (const std::string& piece : best_pieces(word)) {
      if (auto id = vocab_.find(piece)) {
        out.push_back(*id);
        continue;
      }
      if (byte_fallback_ && add_bytes(piece, out)) continue;
      check(unk_id_.has_value(), "Unigram model: text has no piece and the model has no unk_id");
      out.push_back(*unk_id_);
    }
  }

  std::optional<int32_t> token_to_id(std::string_view t) const override { return vocab_.find(t); }
  const std::string* id_to_token(int32_t id) const override { return vocab_.token(id); }
  int32_t size() const override { return vocab_.size(); }

 private:
  bool add_bytes(std::string_view s, std::vector<int32_t>& out) const {
    std::vector<int32_t> ids;
    for (unsigned char b : s) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      auto id = vocab_.find(name);
      if (!id) return false;
      ids.push_back(*id);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    return true;
  }

  struct Node {
    double score = 0;
    int64_t start = -1;  // -1: not reached
    int32_t id = -1;
  };

  // Viterbi over byte positions; ties keep the earlier (shorter) candidate. Consecutive unknown
  // characters come back fused into one piece, which then maps to unk.
  std::vector<std::string> best_pieces(std::string_view s) const {
    std::vector<Node> best(s.size() + 1);
    best[0].start = 0;
    for (size_t pos = 0; pos < s.size();) {
      size_t char_end = pos;
      next_code_point(s, char_end);
      size_t char_len = char_end - pos;
      double base = best[pos].score;
      bool has_single = false;
      auto offer = [&](size_t end, int32_t id, double score) {
        Node& n = best[end];
        double cand = base + score;
        if (n.start < 0 || cand > n.score) n = {cand, static_cast<int64_t>(pos), id};
      };
      for (size_t end = char_end; end <= s.size() && end - pos <= max_piece_bytes_;) {
        if (auto id = vocab_.find(s.substr(pos, end - pos))) {
          offer(end, *id, scores_[static_cast<size_t>(*id)]);
          if (end - pos == char_len) has_single = true;
        }
        if (end == s.size()) break;
        next_code_point(s, end);
      }
      if (!has_single) {
        check(unk_id_.has_value(), "Unigram model: text has no piece and the model has no unk_id");
        offer(char_end, *unk_id_, unk_score_);
      }
      pos = char_end;
    }
    std::vector<std::string> pieces;
    std::string unk_run;  // built backwards
    for (size_t end = s.size(); end > 0;) {
      const Node& n = best[end];
      size_t start = static_cast<size_t>(n.start);
      if (unk_id_ && n.id == *unk_id_) {
        unk_run.insert(0, s.substr(start, end - start));
      } else {
        if (!unk_run.empty()) pieces.push_back(std::move(unk_run)), unk_run.clear();
        pieces.push_back(*vocab_.token(n.id));
      }
      end = start;
    }
    if (!unk_run.empty()) pieces.push_back(std::move(unk_run));
    std::reverse(pieces.begin(), pieces.end());
    return pieces;
  }

  Vocab vocab_;
  std::vector<double> scores_;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
  double unk_score_ = 0;
  size_t max_piece_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_unigram_model(const Json& j, const std::string& origin) {
  return std::make_unique<Unigram>(j, origin);
}

}  // namespace kvlm::text
