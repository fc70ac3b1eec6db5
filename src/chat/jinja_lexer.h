// Jinja's lexer, configured as transformers configures it for chat
// templates: trim_blocks and lstrip_blocks on, default delimiters, no line
// statements.
//
// Whitespace control happens here, as in jinja2's lexer, so the parser only
// sees text that is already trimmed:
//  - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}",
//    "-#}" strip all whitespace after it;
//  - lstrip_blocks: spaces and tabs between the start of a line and "{%" or
//    "{#" are removed ("{%+" keeps them); "{{" is never lstripped;
//  - trim_blocks: the first newline after "%}" or "#}" is removed ("+%}"
//    keeps it).
// Newlines are normalised first ("\r\n" and "\r" become "\n") and one
// trailing newline is dropped, as jinja2 does with its default
// keep_trailing_newline=False. {% raw %} bodies come out as text. Inside
// tags, braces are balanced, so "}}" closes an expression only outside a
// dict literal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "replayssm/status.h"

namespace replayssm::chat {

enum class TokenKind {
  kText,        // template data, already whitespace-trimmed
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // text: the decoded value
  kInt,         // int_value
  kFloat,       // float_value
  kOperator,    // text: "+", "//", "(", ...
  kEnd,         // end of the template
};

struct Token {
  TokenKind kind;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;  // 1-based
  int col = 1;   // 1-based, in code points
};

// Splits `source` (checked to be UTF-8) into tokens. Errors read
// "<name>:<line>:<col>: <what>" (an unclosed tag names where it opened).
Result<std::vector<Token>> tokenize(std::string_view source, const std::string& name);

}  // namespace replayssm::chat
