import type pg from "pg";
import type { AirportsDataset } from "./airports-dataset.js";

/** Row counts of the sample tables, as loaded. */
export interface TableCount {
  table: string;
  rows: number;
}

const SCHEMA = `
CREATE TABLE countries (
  code text PRIMARY KEY CHECK (code ~ '^[A-Z]{2}$'),
  name text NOT NULL,
  continent text NOT NULL,
  wikipedia_link text
);
COMMENT ON TABLE countries IS 'Countries (ISO 3166-1 alpha-2), from OurAirports (public domain)';

CREATE TABLE regions (
  code text PRIMARY KEY,
  local_code text,
  name text NOT NULL,
  iso_country text NOT NULL REFERENCES countries (code),
  continent text NOT NULL,
  wikipedia_link text
);
CREATE INDEX regions_iso_country_idx ON regions (iso_country);
COMMENT ON TABLE regions IS 'First-level subdivisions (ISO 3166-2), from OurAirports (public domain)';

CREATE TABLE airports (
  id integer PRIMARY KEY,
  ident text NOT NULL UNIQUE,
  type text NOT NULL CHECK (type IN ('large_airport', 'medium_airport')),
  name text NOT NULL,
  latitude double precision NOT NULL,
  longitude double precision NOT NULL,
  elevation_ft integer,
  continent text NOT NULL,
  iso_country text NOT NULL REFERENCES countries (code),
  iso_region text NOT NULL REFERENCES regions (code),
  municipality text,
  scheduled_service boolean NOT NULL,
  gps_code text,
  iata_code text UNIQUE,
  wikipedia_link text
);
CREATE INDEX airports_iso_country_idx ON airports (iso_country);
CREATE INDEX airports_municipality_idx ON airports (lower(municipality));
COMMENT ON TABLE airports IS 'Medium and large airports, from OurAirports (public domain)';
`;

function column<T, K extends keyof T>(rows: readonly T[], key: K): T[K][] {
  return rows.map((row) => row[key]);
}

/**
 * Replaces the tables `countries`, `regions` and `airports` with the dataset, in one transaction: each table is
 * filled by a single INSERT ... SELECT FROM unnest(arrays), then analyzed. Run as the role that should own them.
 */
export async function loadAirportsTables(client: pg.Client, data: AirportsDataset): Promise<TableCount[]> {
  await client.query("BEGIN");
  try {
    await client.query("DROP TABLE IF EXISTS airports, regions, countries");
    await client.query(SCHEMA);
    const { countries, regions, airports } = data;
    await client.query(
      `INSERT INTO countries (code, name, continent, wikipedia_link)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])`,
      [
        column(countries, "code"),
        column(countries, "name"),
        column(countries, "continent"),
        column(countries, "wikipedia_link"),
      ],
    );
    await client.query(
      `INSERT INTO regions (code, local_code, name, iso_country, continent, wikipedia_link)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])`,
      [
        column(regions, "code"),
        column(regions, "local_code"),
        column(regions, "name"),
        column(regions, "iso_country"),
        column(regions, "continent"),
        column(regions, "wikipedia_link"),
      ],
    );
    await client.query(
      `INSERT INTO airports (id, ident, type, name, latitude, longitude, elevation_ft, continent, iso_country,
         iso_region, municipality, scheduled_service, gps_code, iata_code, wikipedia_link)
       SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::float8[], $7::int[],
         $8::text[], $9::text[], $10::text[], $11::text[], $12::bool[], $13::text[], $14::text[], $15::text[])`,
      [
        column(airports, "id"),
        column(airports, "ident"),
        column(airports, "type"),
        column(airports, "name"),
        column(airports, "latitude"),
        column(airports, "longitude"),
        column(airports, "elevation_ft"),
        column(airports, "continent"),
        column(airports, "iso_country"),
        column(airports, "iso_region"),
        column(airports, "municipality"),
        column(airports, "scheduled_service"),
        column(airports, "gps_code"),
        column(airports, "iata_code"),
        column(airports, "wikipedia_link"),
      ],
    );
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  }
  await client.query("ANALYZE countries, regions, airports");
  const { rows } = await client.query<{ table: string; rows: number }>(
    `SELECT 'countries' AS table, count(*)::int AS rows FROM countries
     UNION ALL SELECT 'regions', count(*)::int FROM regions
     UNION ALL SELECT 'airports', count(*)::int FROM airports`,
  );
  return rows;
}
