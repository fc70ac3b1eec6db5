// Python's operators on template values, and jinja2's attribute and item
// access.
//
// Arithmetic is Python's: `/` always gives a float, `//` and `%` floor
// toward negative infinity, `**` of ints stays an int, bool counts as int,
// str and list support + and *, and `%` on a str formats. Integer overflow
// past 64 bits is an error rather than a bignum. `~` concatenates str() of
// both sides. Item and attribute access follow jinja2's sandboxed getattr /
// getitem: `obj.name` tries the attribute (a str or dict method) and then
// the item, `obj[key]` the item and then the attribute, and a miss gives an
// Undefined whose hint is the message jinja2 would raise on use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"
#include "replayssm/status.h"

namespace replayssm::chat {

// The error for using an Undefined where a value is needed: its hint
// ("'x' is undefined"), or a generic message when it has none.
Status undefined_error(const Value& v);

// Arithmetic and `~`. `and`/`or` short-circuit in the evaluator instead.
Result<Value> binary_op(ast::BinaryOp op, const Value& a, const Value& b, Meter& meter);
// -x and +x.
Result<Value> unary_op(ast::UnaryOp op, const Value& x);

// `item in container`.
Result<bool> contains(const Value& container, const Value& item, Meter& meter);

Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; a missing part is None. An Undefined for types
// that cannot be sliced, as jinja2's getitem gives.
Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// The items a for loop sees: a list's items, a dict's keys, a str's code
// points, nothing for Undefined. Charged to `meter`.
Result<std::vector<Value>> iterate(const Value& v, Meter& meter);

// len(v); Undefined has length 0.
Result<int64_t> length(const Value& v);

// "'dict object'", "None", ...: how jinja2 names an object in messages.
std::string object_type_repr(const Value& v);

}  // namespace replayssm::chat
