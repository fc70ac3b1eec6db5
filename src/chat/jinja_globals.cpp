// The global functions a chat template can call (see jinja_builtins.h):
// jinja2's range (with the sandbox's 100000-item cap), namespace, dict and
// joiner, plus the two transformers adds, raise_exception and strftime_now.
// Context variables of the same name shadow them, as in jinja2.
#include <ctime>
#include <unordered_map>

#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_operators.h"

namespace replayssm::chat {

namespace {

// jinja2.sandbox.MAX_RANGE.
constexpr int64_t kMaxRange = 100000;

Result<Value> g_range(Evaluator& ev, const CallArgs& args) {
  if (!args.keyword.empty()) return invalid_argument("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3)
    return invalid_argument("range expected 1 to 3 arguments, got " + std::to_string(args.positional.size()));
  int64_t v[3] = {0, 0, 1};
  for (size_t k = 0; k < args.positional.size(); ++k) {
    const Value& a = args.positional[k];
    if (a.is_undefined()) return undefined_error(a);
    if (a.type() != Value::Type::kInt && a.type() != Value::Type::kBool)
      return invalid_argument(std::string("'") + a.type_name() + "' object cannot be interpreted as an integer");
    const int64_t i = a.type() == Value::Type::kBool ? a.as_bool() : a.as_int();
    if (args.positional.size() == 1) v[1] = i;
    else v[k] = i;
  }
  const int64_t start = v[0], stop = v[1], step = v[2];
  if (step == 0) return invalid_argument("range() arg 3 must not be zero");
  // The item count, in a width that cannot overflow.
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 mag = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + mag - 1) / mag;
  if (count > kMaxRange)
    return invalid_argument("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                            std::to_string(kMaxRange) + ").");
  if (!ev.meter().charge(static_cast<int64_t>(count))) return out_of_budget(ev.meter().why());
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) items.push_back(Value::integer(start + k * step));
  return Value::list(std::move(items));
}

// dict(mapping_or_pairs, **kwargs) into `d`.
Status fill_dict(const char* fn, const CallArgs& args, Dict* d) {
  if (args.positional.size() > 1)
    return invalid_argument(std::string(fn) + " expected at most 1 positional argument, got " +
                            std::to_string(args.positional.size()));
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.as_dict().entries()) d->set(k, v);
    } else if (src.is_list()) {
      for (const Value& pair : src.as_list().items) {
        if (!pair.is_list() || pair.as_list().items.size() != 2)
          return invalid_argument(std::string(fn) + ": each sequence element must have 2 items");
        if (!d->set(pair.as_list().items[0], pair.as_list().items[1]))
          return invalid_argument(std::string("unhashable type: '") + pair.as_list().items[0].type_name() + "'");
      }
    } else if (!src.is_undefined()) {
      return invalid_argument(std::string(fn) + ": '" + src.type_name() + "' object is not iterable");
    }
  }
  for (const auto& [k, v] : args.keyword) d->set(Value::string(k), v);
  return Status();
}

Result<Value> g_dict(Evaluator&, const CallArgs& args) {
  Dict d;
  RSSM_RETURN_IF_ERROR(fill_dict("dict", args, &d));
  return Value::dict(std::move(d));
}

Result<Value> g_namespace(Evaluator& ev, const CallArgs& args) {
  Namespace* ns = ev.new_namespace();
  RSSM_RETURN_IF_ERROR(fill_dict("namespace", args, &ns->attrs));
  return Value::name_space(ns);
}

Result<Value> g_raise_exception(Evaluator& ev, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(auto a, bind_args("raise_exception", args, {"message"}));
  if (!a[0]) return invalid_argument("raise_exception() missing 1 required positional argument: 'message'");
  return invalid_argument("raise_exception: " + to_str(*a[0], ev.meter()));
}

// datetime.now().strftime(format), in local time.
Result<Value> g_strftime_now(Evaluator&, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(auto a, bind_args("strftime_now", args, {"format"}));
  if (!a[0] || !a[0]->is_string()) return invalid_argument("strftime_now: the format must be a string");
  const std::string& fmt = a[0]->as_string();
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  if (fmt.empty()) return Value::string("");
  // strftime reports 0 both for "too small" and for an empty result.
  for (size_t cap = 64 + fmt.size() * 4; cap <= (size_t{1} << 20); cap *= 4) {
    std::string buf(cap, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return Value::string(std::move(buf));
    }
  }
  return Value::string("");
}

// joiner(sep=", "): a callable that returns "" the first time, then sep.
Result<Value> g_joiner(Evaluator&, const CallArgs& args) {
  RSSM_ASSIGN_OR_RETURN(auto a, bind_args("joiner", args, {"sep"}));
  const Value sep = a[0] ? *a[0] : Value::string(", ");
  auto used = std::make_shared<bool>(false);
  auto c = std::make_shared<Callable>();
  c->name = "joiner";
  c->fn = [sep, used](Evaluator&, const CallArgs&) -> Result<Value> {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return sep;
  };
  return Value::callable(std::move(c));
}

Value global_fn(const char* name, Result<Value> (*fn)(Evaluator&, const CallArgs&)) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->fn = fn;
  return Value::callable(std::move(c));
}

}  // namespace

const Value* find_global(std::string_view name) {
  static const std::unordered_map<std::string_view, Value> kGlobals = {
      {"range", global_fn("range", g_range)},
      {"dict", global_fn("dict", g_dict)},
      {"namespace", global_fn("namespace", g_namespace)},
      {"joiner", global_fn("joiner", g_joiner)},
      {"raise_exception", global_fn("raise_exception", g_raise_exception)},
      {"strftime_now", global_fn("strftime_now", g_strftime_now)},
  };
  auto it = kGlobals.find(name);
  return it == kGlobals.end() ? nullptr : &it->second;
}

}  // namespace replayssm::chat
