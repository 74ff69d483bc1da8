#include "cache/stream_bindings.h"

#include <gtest/gtest.h>

#include <string>

namespace oasr::cache {
namespace {

TEST(StreamBindingsTest, BindsFindsAndUnbinds) {
  StreamBindings b("Owner", 4, 1);
  ASSERT_TRUE(b.CheckBind(10, 2).ok());
  b.Bind(10, 2);
  EXPECT_EQ(*b.Find(10), 2);
  EXPECT_EQ(b.size(), 1);
  EXPECT_EQ(*b.Unbind(10), 2);
  EXPECT_EQ(b.size(), 0);
  EXPECT_TRUE(b.CheckBind(11, 2).ok());
}

TEST(StreamBindingsTest, ChecksNameTheOwnerAndTheProblem) {
  StreamBindings b("Owner", 4, 1);
  b.Bind(10, 0);
  absl::Status s = b.CheckBind(10, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(std::string(s.message()).rfind("Owner: stream 10", 0), 0u);
  EXPECT_EQ(b.CheckBind(11, 0).code(), absl::StatusCode::kFailedPrecondition);
  s = b.CheckBind(11, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("padding lane"), std::string::npos);
  EXPECT_NE(std::string(b.CheckBind(11, 5).message()).find("out of range"), std::string::npos);
  EXPECT_EQ(b.CheckBind(11, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.Find(11).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(b.Unbind(11).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace oasr::cache
