import { createHash } from "node:crypto";
import type { TLSSocket } from "node:tls";

/**
 * Hash algorithm of `tls-server-end-point` (RFC 5929 section 4.1) by the certificate's signature algorithm
 * OID (DER content bytes, hex): the signature's own hash, with MD5 and SHA-1 upgraded to SHA-256.
 */
const HASH_BY_SIGNATURE_OID: Record<string, string> = {
  "2a864886f70d010104": "sha256", // md5WithRSAEncryption
  "2a864886f70d010105": "sha256", // sha1WithRSAEncryption
  "2a864886f70d01010b": "sha256", // sha256WithRSAEncryption
  "2a864886f70d01010c": "sha384", // sha384WithRSAEncryption
  "2a864886f70d01010d": "sha512", // sha512WithRSAEncryption
  "2a8648ce3d0401": "sha256", // ecdsa-with-SHA1
  "2a8648ce3d040302": "sha256", // ecdsa-with-SHA256
  "2a8648ce3d040303": "sha384", // ecdsa-with-SHA384
  "2a8648ce3d040304": "sha512", // ecdsa-with-SHA512
};

/**
 * Channel binding data for SCRAM-SHA-256-PLUS: the hash of this server's certificate on `socket`. Null when
 * the certificate's signature algorithm has no defined hash (Ed25519, RSA-PSS): PLUS is then not offered.
 */
export function serverEndPointBinding(socket: TLSSocket): Buffer | null {
  const certificate = socket.getCertificate();
  const raw = certificate && "raw" in certificate ? certificate.raw : undefined;
  if (!raw) return null;
  const algorithm = HASH_BY_SIGNATURE_OID[signatureAlgorithmOid(raw) ?? ""];
  return algorithm ? createHash(algorithm).update(raw).digest() : null;
}

/** Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm SEQUENCE { OID, ... }, signature } */
function signatureAlgorithmOid(der: Buffer): string | null {
  try {
    const certificate = readElement(der, 0);
    const tbs = readElement(der, certificate.contentStart);
    const algorithm = readElement(der, tbs.end);
    const oid = readElement(der, algorithm.contentStart);
    if (oid.tag !== 0x06) return null;
    return der.subarray(oid.contentStart, oid.end).toString("hex");
  } catch {
    return null;
  }
}

function readElement(der: Buffer, offset: number): { tag: number; contentStart: number; end: number } {
  const tag = der[offset]!;
  let length = der[offset + 1]!;
  let contentStart = offset + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4) throw new RangeError("unsupported DER length");
    length = der.readUIntBE(offset + 2, bytes);
    contentStart += bytes;
  }
  const end = contentStart + length;
  if (end > der.length) throw new RangeError("DER element runs past the end");
  return { tag, contentStart, end };
}
