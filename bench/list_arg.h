// A comma-separated list on a bench's command line ("1,8,64,256").
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace replayssm::bench {

inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(x);
  return v;
}

}  // namespace replayssm::bench
