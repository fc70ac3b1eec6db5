// TextStream (see text_stream.h).
#include "serve/text_stream.h"

#include <algorithm>

#include "io/utf8.h"

namespace replayssm::serve {

namespace {

// Bytes at the end of `s` that begin a character whose remaining bytes have
// not arrived (0 when the end is a whole character or ill-formed anyway).
size_t incomplete_tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

TextStream::TextStream(const Tokenizer* tok, std::vector<std::string> stops) : tok_(tok) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

Result<TextStream::Delta> TextStream::push(int32_t token) {
  if (stopped_) return Delta{};
  offsets_.push_back(static_cast<int64_t>(released_.size() + pending_.size()) +
                     static_cast<int64_t>(utf8_lossy(bytes_).size()));
  if (tok_ == nullptr) return Delta{};
  RSSM_ASSIGN_OR_RETURN(std::string b, tok_->decode_bytes({&token, 1}));
  bytes_ += b;
  const size_t keep = incomplete_tail(bytes_);
  pending_ += utf8_lossy(std::string_view(bytes_).substr(0, bytes_.size() - keep));
  bytes_.erase(0, bytes_.size() - keep);
  return release();
}

TextStream::Delta TextStream::release() {
  Delta d;
  // The earliest stop string wholly in the pending text ends the completion.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    d.text = pending_.substr(0, first);
    released_ += d.text;
    pending_.clear();
    bytes_.clear();
    d.stopped = stopped_ = true;
    return d;
  }
  // Hold back the longest end of the pending text that begins a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_)
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len)
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  d.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  released_ += d.text;
  return d;
}

std::string TextStream::finish() {
  if (stopped_) return {};
  std::string rest = pending_ + utf8_lossy(bytes_);
  pending_.clear();
  bytes_.clear();
  released_ += rest;
  return rest;
}

}  // namespace replayssm::serve
