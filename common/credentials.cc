#include "common/credentials.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "core/util/status_macros.h"

namespace vtrain::common {
namespace {

// The whole of the PEM file `path`, which the flag `flag` named.
absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  absl::StatusOr<std::string> pem = ReadFile(path);
  if (!pem.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", path,
        " cannot be read; name a readable PEM file (check the path and its permissions)"));
  }
  // gRPC reports a file that is not PEM only later and vaguely ("empty
  // address list", a failed bind): say so here, naming the flag.
  const bool key = absl::StrContains(flag, "key");
  const char* kind = key ? "PRIVATE KEY-----" : "-----BEGIN CERTIFICATE-----";
  if (!absl::StrContains(*pem, kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", path, " is not a PEM ", key ? "private key" : "certificate", " (no '",
        key ? "-----BEGIN ... PRIVATE KEY-----" : kind, "' block); give the PEM file"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::string> ReadTokenFile(const std::string& flag, const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", flag, "=", path, "; check the path and its permissions"));
  }
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, " is empty; write the token into it"));
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> LoadServerCredentials(
    const ServerTlsFiles& files) {
  if (files.cert_file.empty() && files.key_file.empty()) {
    if (!files.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca-file needs TLS: set --tls-cert-file and --tls-key-file too");
    }
    return grpc::InsecureServerCredentials();
  }
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        files.cert_file.empty() ? "--tls-cert-file" : "--tls-key-file",
        " is not set; TLS needs both --tls-cert-file and --tls-key-file to name readable PEM "
        "files"));
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  VTRAIN_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem("--tls-cert-file", files.cert_file));
  VTRAIN_ASSIGN_OR_RETURN(pair.private_key, ReadPem("--tls-key-file", files.key_file));
  ssl.pem_key_cert_pairs.push_back(pair);
  if (!files.client_ca_file.empty()) {
    VTRAIN_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                            ReadPem("--tls-client-ca-file", files.client_ca_file));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LoadChannelCredentials(
    const ChannelTlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.cert_file.empty() ? files.key_flag : files.cert_flag, " needs ",
                     files.cert_file.empty() ? files.cert_flag : files.key_flag,
                     " too: mutual TLS presents a certificate and its key"));
  }
  if (files.ca_file.empty()) {
    if (!files.cert_file.empty()) {
      // A client certificate without TLS would send the token in clear.
      return absl::InvalidArgumentError(absl::StrCat(
          files.cert_flag, " and ", files.key_flag, " need ", files.ca_flag,
          " (the CA that signed the server's certificate); without it the connection would "
          "be plaintext"));
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  VTRAIN_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(files.ca_flag, files.ca_file));
  if (!files.cert_file.empty()) {
    VTRAIN_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem(files.cert_flag, files.cert_file));
    VTRAIN_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(files.key_flag, files.key_file));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace vtrain::common
