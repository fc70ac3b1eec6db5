// What a chat template can call: jinja2's filters and tests, the methods of
// Python's str, dict and list, and the globals transformers provides.
//
// Each builtin takes its arguments as Python would (positional or keyword,
// with defaults) through bind_args(), so `tojson(indent=2)` and `tojson(2)`
// both work and a misspelt keyword is an error naming the builtin. Errors
// carry no location: the evaluator adds the template position of the call.
// The sandbox transformers uses (ImmutableSandboxedEnvironment) is mirrored:
// methods that would mutate a list or dict are "unsafe" Undefined values,
// harmless until called, and range() is capped at 100000 items.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.h"
#include "replayssm/status.h"

namespace replayssm::chat {

using FilterFn = Result<Value> (*)(Evaluator& ev, const Value& operand, const CallArgs& args);
using TestFn = Result<bool> (*)(Evaluator& ev, const Value& operand, const CallArgs& args);

// nullptr when jinja2 (with transformers' tojson) has no such filter / test.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// `obj.name` for a name that Python's getattr() finds on a str, list or
// dict: a bound method, or for a method the sandbox forbids an Undefined
// whose use reports the SecurityError. nullopt when there is no such
// attribute (the caller then tries obj["name"]).
std::optional<Value> find_method(const Value& obj, const std::string& name);

// A global function (range, namespace, dict, raise_exception, strftime_now,
// ...), or nullptr.
const Value* find_global(std::string_view name);

// Binds `args` to the parameters `names` as Python does; an entry is
// nullopt where the caller passed nothing. Errors name `fn` and the
// argument: too many positional arguments, an unknown or repeated keyword.
Result<std::vector<std::optional<Value>>> bind_args(std::string_view fn, const CallArgs& args,
                                                    std::initializer_list<std::string_view> names);

// Python's `format % args` (printf-style), for the |format filter and the
// % operator on strings: %s %r %d %i %f %e %g %x %o %c %% with flags,
// width and precision; `args` is a tuple, a dict (for %(name)s) or a value.
Result<std::string> percent_format(std::string_view format, const Value& args, Meter& meter);

// Python's str.format(*args, **kwargs): {} {0} {name} fields with .attr and
// [key] lookups, !r/!s/!a conversions, and format specs ([[fill]align]
// [sign][#][0][width][,][.precision][type]).
Result<std::string> str_format(std::string_view format, const CallArgs& args, Meter& meter);

}  // namespace replayssm::chat
