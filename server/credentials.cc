#include "server/credentials.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace vtrain::server {
namespace {

// The whole of the PEM file `path`, which the flag `flag` named.
absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag,
        " is not set; TLS needs both --tls-cert-file and --tls-key-file "
        "to name readable PEM files"));
  }
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", path,
        " cannot be read; name a readable PEM file (check the path and its "
        "permissions)"));
  }
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> LoadServerCredentials(
    const ServerTlsFiles& files) {
  if (files.cert_file.empty() && files.key_file.empty()) {
    if (!files.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca-file needs TLS: set --tls-cert-file and "
          "--tls-key-file too");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  VTRAIN_ASSIGN_OR_RETURN(pair.cert_chain,
                          ReadPem("--tls-cert-file", files.cert_file));
  VTRAIN_ASSIGN_OR_RETURN(pair.private_key,
                          ReadPem("--tls-key-file", files.key_file));
  ssl.pem_key_cert_pairs.push_back(pair);
  if (!files.client_ca_file.empty()) {
    VTRAIN_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem("--tls-client-ca-file",
                                                        files.client_ca_file));
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
LoadRegistryChannelCredentials(const std::string& ca_file) {
  if (ca_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  VTRAIN_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                          ReadPem("--registry-ca-file", ca_file));
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::string> ReadPushToken(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read --push-token-file=", path));
  std::stringstream contents;
  contents << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(contents.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--push-token-file=", path, " is empty; write the token into it"));
  }
  return token;
}

}  // namespace vtrain::server
