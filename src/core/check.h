// RSSM_CHECK: broken invariants abort with file and line.
//
// Only for conditions that are bugs in replayssm itself. Anything a user can
// cause (a bad file, a bad option) must be a Status instead.
#pragma once

#include <cstdio>
#include <cstdlib>

#define RSSM_CHECK(cond)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                      \
      std::abort();                                                             \
    }                                                                           \
  } while (0)
