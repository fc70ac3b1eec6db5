// The values a chat template computes with, and the Python rules they follow.
//
// transformers renders chat templates with Python's jinja2, so a value
// behaves like the Python object it would be there: None, bool, int (64-bit
// here; overflow is an error instead of a bignum), float, str, list, tuple,
// dict (insertion-ordered, str/int/float/bool/None keys), jinja2's
// Namespace, a callable (macro, global function or bound method), and
// jinja2's default Undefined, which prints as "" and is falsy but fails when
// used as a number, subscripted or compared. Printing follows str()/repr();
// equality follows == (1 == 1.0 == True; (1,) != [1]); JSON follows
// json.dumps as transformers' tojson calls it.
//
// Strings, lists and dicts are immutable and shared (the sandbox transformers
// uses forbids mutating them), so copying a Value is a reference-count bump.
// Being immutable, a list or dict knows its nesting depth from birth, which
// the evaluator bounds. A Namespace is the one mutable object, shared by
// reference as in Python; it can end up holding itself, so namespaces are
// owned by the render that made them (an arena in the Evaluator) and a Value
// only points at one: no reference cycles, and no destructor recursion as
// deep as a chain of namespaces.
#pragma once

#include <nlohmann/json.hpp>

#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "chat/jinja_meter.h"
#include "replayssm/status.h"

namespace replayssm::chat {

class Value;
class Dict;
class Evaluator;

struct List {
  std::vector<Value> items;
  bool tuple = false;  // prints as (a, b) and never equals a list
  int depth = 1;       // 1 + the deepest item's depth (Value::list sets it)
};

struct Namespace;
struct Callable;

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() = default;  // an Undefined with no name
  static Value undefined(std::string hint);  // hint: the UndefinedError message, "'x' is undefined"
  static Value none() { return Value(NoneTag{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(int64_t i) { return Value(i); }
  static Value number(double d) { return Value(d); }
  static Value string(std::string s) { return Value(std::make_shared<const std::string>(std::move(s))); }
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(Dict d);
  static Value name_space(Namespace* ns) { return Value(ns); }
  static Value callable(std::shared_ptr<const Callable> fn) { return Value(std::move(fn)); }

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_undefined() const { return type() == Type::kUndefined; }
  bool is_none() const { return type() == Type::kNone; }
  bool is_string() const { return type() == Type::kString; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_float() const { return type() == Type::kFloat; }
  // int, float or bool: what Python arithmetic accepts.
  bool is_number() const { return type() == Type::kInt || type() == Type::kFloat || type() == Type::kBool; }
  bool is_list() const { return type() == Type::kList; }
  bool is_dict() const { return type() == Type::kDict; }
  // Nesting depth of lists and dicts (a scalar, a namespace: 0).
  int depth() const;

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  // A number as double (bool as 0/1); only for is_number() values.
  double to_double() const;
  const std::string& as_string() const { return *std::get<StrPtr>(v_); }
  const List& as_list() const { return *std::get<ListPtr>(v_); }
  const Dict& as_dict() const { return *std::get<DictPtr>(v_); }
  Namespace& as_namespace() const { return *std::get<NsPtr>(v_); }
  const Callable& as_callable() const { return *std::get<FnPtr>(v_); }
  const std::string& undefined_hint() const;

  // Python truthiness.
  bool truthy() const;
  // The type name Python would use in an error ("int", "str", "NoneType").
  const char* type_name() const;
  // Same object: for `is sameas` and the identity shortcut in ==.
  bool same_object(const Value& other) const;

 private:
  struct NoneTag {};
  struct UndefinedTag {
    std::shared_ptr<const std::string> hint;
  };
  using StrPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const List>;
  using DictPtr = std::shared_ptr<const Dict>;
  using NsPtr = Namespace*;  // owned by the Evaluator's arena
  using FnPtr = std::shared_ptr<const Callable>;
  using Storage =
      std::variant<UndefinedTag, NoneTag, bool, int64_t, double, StrPtr, ListPtr, DictPtr, NsPtr, FnPtr>;

  template <typename T>
  explicit Value(T v) : v_(std::move(v)) {}

  Storage v_;
};

// An insertion-ordered dict. Keys are str, int, float, bool or None;
// assigning an existing key keeps its position, as in Python.
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // False when `key` is of a type this dict cannot hold (list, dict, ...).
  bool set(const Value& key, Value value);
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  // 1 + the deepest value's depth.
  int depth() const { return depth_; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::pair<Value, Value>> entries_;
  int depth_ = 1;
  // str keys -> position in entries_, searchable by string_view.
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> string_index_;
};

// jinja2's namespace(): attributes assignable with {% set ns.x = ... %}.
struct Namespace {
  Dict attrs;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  enum class Kind { kFunction, kMacro, kMethod };
  Kind kind = Kind::kFunction;
  std::string name;  // the function or macro name; for a method "items of dict object"
  std::function<Result<Value>(Evaluator&, const CallArgs&)> fn;
};

// Python's repr(float): the shortest digits that read back exactly, in
// exponent form below 1e-4 and from 1e16 up ("1.0", "0.5", "1e+16", "inf").
std::string format_float(double d);

// str(v) and repr(v) appended to `out`. Containers print their items with
// repr. Work and length are charged to `meter`; once it fails the output is
// cut short (the caller reports the meter's error).
void append_str(const Value& v, Meter& meter, std::string* out);
void append_repr(const Value& v, Meter& meter, std::string* out);
std::string to_str(const Value& v, Meter& meter);

// Python ==.
bool py_equal(const Value& a, const Value& b, Meter& meter);
// Python's <, as an ordering: numbers with numbers, str with str, list with
// list and tuple with tuple (element-wise). nullopt when Python would raise
// TypeError; unordered for NaN.
std::optional<std::partial_ordering> py_compare(const Value& a, const Value& b, Meter& meter);

// json.dumps(v, ensure_ascii=..., indent=..., separators=..., sort_keys=...).
struct JsonStyle {
  std::optional<std::string> indent;  // set: newlines plus this per level
  std::string item_separator = ", ";  // json.dumps uses "," when indent is set
  std::string key_separator = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
};
// Errors (a value json.dumps refuses: Undefined, a namespace, a callable)
// name the type, as Python's TypeError does.
Status append_json(const Value& v, const JsonStyle& style, Meter& meter, std::string* out);

// A context value from JSON. Objects keep the order nlohmann gives them
// (sorted for nlohmann::json, insertion order for nlohmann::ordered_json).
// Integers beyond int64 become floats; strings must be valid UTF-8 and
// nesting at most `max_depth` deep, else an error naming the JSON path.
Result<Value> value_from_json(const nlohmann::json& j, int max_depth);
Result<Value> value_from_json(const nlohmann::ordered_json& j, int max_depth);

}  // namespace replayssm::chat
