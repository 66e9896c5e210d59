/**
 * The SQLSTATEs pgtoll answers with or recognises, by PostgreSQL's condition names (errcodes.txt), one constant
 * each for every surface. `PT402` is pgtoll's own class "PT" (no PostgreSQL class uses it): the agent's balance
 * does not cover the statement; deposit more and retry. `PT422`, in the same class: a budget the agent set itself
 * (`pgtoll.max_session_cost`, its daily limit) ends the statement; paying more would not help.
 */
export const SqlState = {
  insufficientFunds: "PT402",
  budgetExceeded: "PT422",
  featureNotSupported: "0A000",
  connectionRejected: "08004",
  connectionFailure: "08006",
  protocolViolation: "08P01",
  invalidParameterValue: "22023",
  cantChangeRuntimeParam: "55P02",
  uniqueViolation: "23505",
  checkViolation: "23514",
  readOnlyTransaction: "25006",
  invalidAuthorization: "28000",
  invalidPassword: "28P01",
  invalidCatalogName: "3D000",
  serializationFailure: "40001",
  deadlockDetected: "40P01",
  insufficientPrivilege: "42501",
  syntaxError: "42601",
  undefinedObject: "42704",
  tooManyConnections: "53300",
  programLimitExceeded: "54000",
  queryCanceled: "57014",
  adminShutdown: "57P01",
  crashShutdown: "57P02",
  cannotConnectNow: "57P03",
} as const;
