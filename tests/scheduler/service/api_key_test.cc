// The public API key's check: "Bearer KEY", the scheme in any case, the key exactly.
#include "scheduler/service/api_key.h"

#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

TEST(ApiKeyTest, NoKeySetAdmitsEveryone) {
  EXPECT_TRUE(PresentsApiKey("", ""));
  EXPECT_TRUE(PresentsApiKey("Bearer anything", ""));
}

TEST(ApiKeyTest, OnlyTheExactKeyAfterBearer) {
  EXPECT_TRUE(PresentsApiKey("Bearer sk-123", "sk-123"));
  EXPECT_TRUE(PresentsApiKey("bearer sk-123", "sk-123"));
  EXPECT_TRUE(PresentsApiKey("BEARER sk-123", "sk-123"));
  EXPECT_FALSE(PresentsApiKey("", "sk-123"));
  EXPECT_FALSE(PresentsApiKey("sk-123", "sk-123"));          // no scheme
  EXPECT_FALSE(PresentsApiKey("Basic sk-123", "sk-123"));    // another scheme
  EXPECT_FALSE(PresentsApiKey("Bearer sk-12", "sk-123"));    // a prefix
  EXPECT_FALSE(PresentsApiKey("Bearer sk-1234", "sk-123"));  // longer
  EXPECT_FALSE(PresentsApiKey("Bearer SK-123", "sk-123"));   // the key is case-sensitive
  EXPECT_FALSE(PresentsApiKey("Bearer  sk-123", "sk-123"));  // two spaces
  EXPECT_FALSE(PresentsApiKey("Bearer", "sk-123"));
}

}  // namespace
}  // namespace baton::scheduler
