#pragma once
// UTF-8 and Unicode helpers for the tokenizer. Character classes follow the definitions that
// Hugging Face `tokenizers` (Rust) uses, so that every component classifies code points the same
// way: Rust's char::is_whitespace / is_alphanumeric / is_numeric and the regex crate's \w and \s.
// Properties come from ICU.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvlm::text {

// Decodes the code point at s[i] and advances i. Invalid or truncated sequences yield U+FFFD and
// advance by one byte (the same bytes Rust's from_utf8_lossy would replace).
char32_t next_code_point(std::string_view s, size_t& i);
// Byte length of the UTF-8 sequence that starts with `lead` (1 for invalid lead bytes).
size_t utf8_len(unsigned char lead);
void append_utf8(std::string& out, char32_t cp);
std::string to_utf8(char32_t cp);
// Replaces invalid UTF-8 with U+FFFD, one per maximal invalid subsequence, as from_utf8_lossy.
std::string utf8_lossy(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);
std::vector<char32_t> to_code_points(std::string_view s);

// Rust char::is_whitespace (Unicode White_Space).
bool is_whitespace(char32_t c);
// Rust char::is_numeric (general categories Nd, Nl, No).
bool is_numeric(char32_t c);
// General category L* (the regex class \p{L}).
bool is_letter(char32_t c);
// Rust char::is_alphabetic (Unicode Alphabetic).
bool is_alphabetic(char32_t c);
bool is_alphanumeric(char32_t c);
// The regex crate's \w: Alphabetic, marks, decimal numbers, connector punctuation, Join_Control.
bool is_word_char(char32_t c);
// Unicode general category P* (what tokenizers calls is_punctuation), plus ASCII punctuation.
bool is_punctuation(char32_t c);
// General category Mn (what StripAccents and BertNormalizer remove after NFD).
bool is_nonspacing_mark(char32_t c);
// General category M (Mn, Mc, Me): what the StripAccents normalizer removes.
bool is_mark(char32_t c);
// General categories Cc, Cf, Co: BertNormalizer's control characters. Unassigned code points
// (Cn, e.g. the noncharacters U+FDD0, U+FFFF) are kept, as tokenizers 0.23 keeps them.
bool is_other_category(char32_t c);

enum class NormForm { NFC, NFD, NFKC, NFKD };
std::string normalize_unicode(std::string_view s, NormForm form);
// Full Unicode lowercase mapping of each code point on its own (Rust's char::to_lowercase).
std::string to_lower(std::string_view s);
// Splits s into extended grapheme clusters (byte lengths), in order.
std::vector<size_t> grapheme_lengths(std::string_view s);

}  // namespace kvlm::text
