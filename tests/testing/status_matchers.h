// gMock matchers for absl::Status and absl::StatusOr<T>, spelled as abseil's own
// (absl/status/status_matchers.h, which the pinned abseil 20220623 does not ship yet):
//   EXPECT_THAT(status_or, absl_testing::IsOk());
//   EXPECT_THAT(status, absl_testing::StatusIs(absl::StatusCode::kNotFound, HasSubstr("w.bin")));
//   EXPECT_THAT(status_or, absl_testing::IsOkAndHolds(42));
// When abseil >= 20240116 is the floor, delete this file and include abseil's header instead.
#pragma once

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace absl_testing {
namespace internal {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

class StatusIsMatcher {
 public:
  StatusIsMatcher(absl::StatusCode code, testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename StatusLike>
  bool MatchAndExplain(const StatusLike& value, testing::MatchResultListener* listener) const {
    const absl::Status& status = GetStatus(value);
    *listener << "whose status is " << status;
    if (status.code() != code_) return false;
    const std::string message(status.message());
    return message_.MatchAndExplain(message, listener);
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has status code " << absl::StatusCodeToString(code_) << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have status code " << absl::StatusCodeToString(code_)
        << " or has a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  absl::StatusCode code_;
  testing::Matcher<const std::string&> message_;
};

class IsOkMatcher {
 public:
  template <typename StatusLike>
  bool MatchAndExplain(const StatusLike& value, testing::MatchResultListener* listener) const {
    const absl::Status& status = GetStatus(value);
    if (!status.ok()) *listener << "whose status is " << status;
    return status.ok();
  }
  void DescribeTo(std::ostream* os) const { *os << "is OK"; }
  void DescribeNegationTo(std::ostream* os) const { *os << "is not OK"; }
};

template <typename ValueMatcher>
class IsOkAndHoldsMatcher {
 public:
  explicit IsOkAndHoldsMatcher(ValueMatcher value) : value_(std::move(value)) {}

  template <typename T>
  bool MatchAndExplain(const absl::StatusOr<T>& status_or,
                       testing::MatchResultListener* listener) const {
    if (!status_or.ok()) {
      *listener << "whose status is " << status_or.status();
      return false;
    }
    return testing::MatcherCast<const T&>(value_).MatchAndExplain(*status_or, listener);
  }
  void DescribeTo(std::ostream* os) const { *os << "is OK and holds a value that matches"; }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "is not OK or holds a value that does not match";
  }

 private:
  ValueMatcher value_;
};

}  // namespace internal

inline testing::PolymorphicMatcher<internal::IsOkMatcher> IsOk() {
  return testing::MakePolymorphicMatcher(internal::IsOkMatcher());
}

inline testing::PolymorphicMatcher<internal::StatusIsMatcher> StatusIs(
    absl::StatusCode code, testing::Matcher<const std::string&> message = testing::_) {
  return testing::MakePolymorphicMatcher(internal::StatusIsMatcher(code, std::move(message)));
}

template <typename ValueMatcher>
testing::PolymorphicMatcher<internal::IsOkAndHoldsMatcher<ValueMatcher>> IsOkAndHolds(
    ValueMatcher value) {
  return testing::MakePolymorphicMatcher(
      internal::IsOkAndHoldsMatcher<ValueMatcher>(std::move(value)));
}

}  // namespace absl_testing
