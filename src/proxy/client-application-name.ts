/**
 * The application_name a client asked for at startup, settled as PostgreSQL and libpq settle it: the
 * `application_name` parameter, else `-c application_name=…` in `options` (found in `settings`, the settings
 * parsed from the startup), else `fallback_application_name`. Undefined when the client named none.
 */
export function clientApplicationName(
  params: Record<string, string>,
  settings: Record<string, string>,
): string | undefined {
  return (
    params.application_name ??
    settings.application_name ??
    params.fallback_application_name ??
    settings.fallback_application_name
  );
}

/**
 * The settings to start the upstream session with, carrying the client's application_name. libpq sends its
 * fallback as application_name itself; a driver that sends `fallback_application_name` as is would have the
 * server refuse the session (no such setting), so it is turned into application_name here and dropped.
 */
export function withClientApplicationName(
  params: Record<string, string>,
  settings: Record<string, string>,
): Record<string, string> {
  const name = clientApplicationName(params, settings);
  const { fallback_application_name: _fallback, ...rest } = settings;
  return name === undefined ? rest : { ...rest, application_name: name };
}
