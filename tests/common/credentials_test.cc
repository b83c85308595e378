#include "common/credentials.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::common {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/credentials_test_", name);
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

TEST(CredentialsTest, TokenFilesAreTrimmedAndMustHoldAToken) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::string token,
                              ReadTokenFile("--token-file", WriteTemp("t", "  s3cret \n")));
  EXPECT_EQ(token, "s3cret");
  EXPECT_THAT(ReadTokenFile("--token-file", WriteTemp("e", " \n")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--token-file=")));
  EXPECT_THAT(ReadTokenFile("--push-token-file", "/nonexistent/token"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--push-token-file")));
}

ChannelTlsFiles Channel(const std::string& ca, const std::string& cert, const std::string& key) {
  ChannelTlsFiles files;
  files.ca_file = ca;
  files.cert_file = cert;
  files.key_file = key;
  return files;
}

ServerTlsFiles ServerFiles(const std::string& cert, const std::string& key,
                           const std::string& client_ca) {
  ServerTlsFiles files;
  files.cert_file = cert;
  files.key_file = key;
  files.client_ca_file = client_ca;
  return files;
}

ChannelTlsFiles RegistryCa(const std::string& ca) {
  ChannelTlsFiles files = Channel(ca, "", "");
  files.ca_flag = "--registry-ca-file";
  return files;
}

// An incomplete TLS combination is refused: it used to fall back to
// plaintext and send the bearer token in clear.
TEST(CredentialsTest, IncompleteChannelTlsIsRefusedNotPlaintext) {
  const std::string pem = WriteTemp("pem", "-----BEGIN CERTIFICATE-----\n");
  EXPECT_THAT(LoadChannelCredentials(Channel("", pem, pem)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("need --tls-ca-file")));
  EXPECT_THAT(LoadChannelCredentials(Channel(pem, pem, "")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls-cert-file needs --tls-key-file")));
  EXPECT_THAT(LoadChannelCredentials(Channel("", "", pem)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls-key-file needs --tls-cert-file")));
  EXPECT_THAT(LoadChannelCredentials(RegistryCa("/nonexistent/ca.pem")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--registry-ca-file=")));
  VTRAIN_EXPECT_OK(LoadChannelCredentials({}).status());
  VTRAIN_EXPECT_OK(LoadChannelCredentials(Channel(pem, "", "")).status());
}

TEST(CredentialsTest, IncompleteServerTlsIsRefused) {
  const std::string pem = WriteTemp("pem2", "x");
  EXPECT_THAT(LoadServerCredentials(ServerFiles(pem, "", "")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-key-file is not set")));
  EXPECT_THAT(
      LoadServerCredentials(ServerFiles("", "", pem)),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-client-ca-file needs TLS")));
  VTRAIN_EXPECT_OK(LoadServerCredentials({}).status());
}

// A file that is not PEM is refused naming the flag (gRPC used to report it
// later as "empty address list" or as a failed bind).
TEST(CredentialsTest, FilesThatAreNotPemAreRefusedNamingTheFlag) {
  const std::string garbage = WriteTemp("garbage", "not a certificate\n");
  EXPECT_THAT(LoadChannelCredentials(Channel(garbage, "", "")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls-ca-file=" + garbage + " is not a PEM certificate")));
  const std::string cert = WriteTemp("cert", "-----BEGIN CERTIFICATE-----\nx\n");
  EXPECT_THAT(LoadServerCredentials(ServerFiles(cert, garbage, "")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls-key-file=" + garbage + " is not a PEM private key")));
}

}  // namespace
}  // namespace vtrain::common
