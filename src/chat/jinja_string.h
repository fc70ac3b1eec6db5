// Python's str methods on UTF-8 text, as chat templates call them.
//
// Jinja runs on Python str, a sequence of code points: len("é") is 1, "é"[0]
// is "é", and strip() removes Unicode whitespace. Our strings are UTF-8
// bytes, well-formed by construction (template source and context strings
// are validated once, on the way in), so these functions index and slice by
// code point and decode on the fly; pure-ASCII text takes byte fast paths.
// Case mapping uses utf8proc's simple (one-to-one) mappings, so the rare
// characters whose Python upper() grows ("ß" -> "SS") map to themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace replayssm::chat {

// Number of code points.
size_t py_len(std::string_view s);
bool is_ascii(std::string_view s);

// The code points of `s` and the byte offset where each starts; offsets has
// one extra entry, s.size().
void code_point_offsets(std::string_view s, std::vector<size_t>* offsets);

// Python's str.isspace() for one code point.
bool py_isspace(char32_t c);

// str.strip / lstrip / rstrip: `chars` absent strips whitespace, present
// strips any of its code points.
std::string py_strip(std::string_view s, const std::optional<std::string_view>& chars, bool left,
                     bool right);

// str.split / rsplit: `sep` absent splits on runs of whitespace and drops
// empty pieces; `maxsplit` < 0 means no limit. An empty `sep` is the
// caller's error to report (Python raises ValueError).
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string_view>& sep,
                                  int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string_view>& sep,
                                   int64_t maxsplit);

// str.splitlines(keepends): splits on \n, \r, \r\n, \v, \f, \x1c-\x1e,
// \x85, U+2028 and U+2029.
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);

// str.replace(old, new, count); count < 0 means all. An empty `old` inserts
// `repl` before every code point and at the end, as Python does.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count);

// Number of non-overlapping occurrences (str.count); empty `sub` counts
// py_len + 1 positions.
int64_t py_count(std::string_view s, std::string_view sub);

// str.find: the code point index of the first occurrence, or -1.
int64_t py_find(std::string_view s, std::string_view sub);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
// str.capitalize: first code point upper (title) case, the rest lower.
std::string py_capitalize(std::string_view s);
// str.title: a cased letter after an uncased one is upper, other letters lower.
std::string py_title(std::string_view s);
// Jinja's |title filter, which is not str.title: words begin after runs of
// whitespace, '-', '(', '{', '[' or '<', and only a word's first code point
// is raised.
std::string jinja_title(std::string_view s);

// str.isdigit / isalpha / isalnum / islower / isupper / isspace on the whole
// string (false for an empty one, as in Python).
bool py_isdigit(std::string_view s);
bool py_isalpha(std::string_view s);
bool py_isalnum(std::string_view s);
bool py_islower(std::string_view s);
bool py_isupper(std::string_view s);
bool py_isspace_str(std::string_view s);

// repr() of a str: single quotes unless the text holds ' and no ", with
// \\, \n, \r, \t, the quote and non-printable code points escaped.
void append_py_repr(std::string_view s, std::string* out);

// The code points [start, stop) with `step` (never 0), indices already
// normalised as Python's slice.indices() does.
std::string py_slice(std::string_view s, int64_t start, int64_t stop, int64_t step);

}  // namespace replayssm::chat
