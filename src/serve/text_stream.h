// TextStream: one completion's text as its tokens arrive — what a server
// sends, with stop strings found across token boundaries.
//
// A token's bytes may hold part of a character (byte-level BPE), and the
// text's end may be the start of a stop string that the next tokens
// complete. So push() releases only text that is final: whole characters,
// and nothing that may still turn out to begin a stop string. When a stop
// string appears, the text before it is released and the completion ends;
// the stop string and anything after it are never sent (OpenAI's rule).
// finish() releases what was held back at the end (a partial character as
// U+FFFD, as the tokenizer's decode() would).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "replayssm/status.h"

namespace replayssm::serve {

class TextStream {
 public:
  // The tokenizer must outlive the stream. Empty stop strings are ignored.
  // Without a tokenizer (a server of token ids) the text stays empty.
  TextStream(const Tokenizer* tok, std::vector<std::string> stops);

  struct Delta {
    std::string text;      // newly final text
    bool stopped = false;  // a stop string ended the completion (no more text)
  };
  // Appends a token. After a stop, further tokens are ignored.
  Result<Delta> push(int32_t token);
  // Releases what was held back; nothing after a stop.
  std::string finish();

  const std::string& text() const { return released_; }  // everything released so far
  bool stopped() const { return stopped_; }
  // Per pushed token: where its text begins in the completion's text
  // (bytes; OpenAI's text_offset).
  const std::vector<int64_t>& offsets() const { return offsets_; }

 private:
  // Releases the part of pending_ that can no longer start a stop string.
  Delta release();

  const Tokenizer* tok_;
  std::vector<std::string> stops_;
  std::string bytes_;     // decoded bytes not yet text (a partial character)
  std::string pending_;   // text not yet released (a possible stop string's start)
  std::string released_;
  std::vector<int64_t> offsets_;
  bool stopped_ = false;
};

}  // namespace replayssm::serve
