/**
 * Type bytes of PostgreSQL protocol 3.0 messages. The same letter means different messages in each
 * direction ('D' is Describe from a client but DataRow from a server), hence two enums.
 */
// biome-ignore lint/suspicious/noConstEnum: isolatedModules keeps the runtime object, so imports resolve
export const enum FrontendCode {
  Bind = 0x42, // B
  Close = 0x43, // C
  CopyData = 0x64, // d
  CopyDone = 0x63, // c
  CopyFail = 0x66, // f
  Describe = 0x44, // D
  Execute = 0x45, // E
  Flush = 0x48, // H
  FunctionCall = 0x46, // F
  Parse = 0x50, // P
  /** Also GSSResponse, SASLInitialResponse and SASLResponse: the auth exchange tells them apart. */
  PasswordMessage = 0x70, // p
  Query = 0x51, // Q
  Sync = 0x53, // S
  Terminate = 0x58, // X
}

// biome-ignore lint/suspicious/noConstEnum: isolatedModules keeps the runtime object, so imports resolve
export const enum BackendCode {
  Authentication = 0x52, // R
  BackendKeyData = 0x4b, // K
  BindComplete = 0x32, // 2
  CloseComplete = 0x33, // 3
  CommandComplete = 0x43, // C
  CopyBothResponse = 0x57, // W
  CopyData = 0x64, // d
  CopyDone = 0x63, // c
  CopyInResponse = 0x47, // G
  CopyOutResponse = 0x48, // H
  DataRow = 0x44, // D
  EmptyQueryResponse = 0x49, // I
  ErrorResponse = 0x45, // E
  FunctionCallResponse = 0x56, // V
  NegotiateProtocolVersion = 0x76, // v
  NoData = 0x6e, // n
  NoticeResponse = 0x4e, // N
  NotificationResponse = 0x41, // A
  ParameterDescription = 0x74, // t
  ParameterStatus = 0x53, // S
  ParseComplete = 0x31, // 1
  PortalSuspended = 0x73, // s
  ReadyForQuery = 0x5a, // Z
  RowDescription = 0x54, // T
}

/** The int32 that opens an untyped startup-phase packet, after its length. */
// biome-ignore lint/suspicious/noConstEnum: isolatedModules keeps the runtime object, so imports resolve
export const enum StartupCode {
  /** Protocol 3.0: major 3 in the high 16 bits, minor 0 in the low 16 bits. */
  ProtocolVersion3 = 196608,
  CancelRequest = 80877102,
  SSLRequest = 80877103,
  GSSENCRequest = 80877104,
}

/** Subtype int32 of an Authentication ('R') message. */
// biome-ignore lint/suspicious/noConstEnum: isolatedModules keeps the runtime object, so imports resolve
export const enum AuthenticationCode {
  Ok = 0,
  KerberosV5 = 2,
  CleartextPassword = 3,
  MD5Password = 5,
  GSS = 7,
  GSSContinue = 8,
  SSPI = 9,
  SASL = 10,
  SASLContinue = 11,
  SASLFinal = 12,
}

/** Single-byte answers to SSLRequest / GSSENCRequest (not framed). */
// biome-ignore lint/suspicious/noConstEnum: isolatedModules keeps the runtime object, so imports resolve
export const enum EncryptionResponse {
  /** SSLRequest accepted: the TLS handshake follows. */
  Accept = 0x53, // S
  /** GSSENCRequest accepted. */
  AcceptGSS = 0x47, // G
  /** Either request refused: go on in plain text. */
  Refuse = 0x4e, // N
}
