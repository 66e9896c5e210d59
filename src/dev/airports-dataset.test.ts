import { describe, expect, it } from "vitest";
import { loadAirportsDataset } from "./airports-dataset.js";

describe("loadAirportsDataset", () => {
  const data = loadAirportsDataset();

  it("has thousands of airports, with every country and region they name", () => {
    expect([data.countries.length, data.regions.length, data.airports.length]).toEqual([248, 3901, 5210]);
    const countries = new Set(data.countries.map((c) => c.code));
    const regions = new Set(data.regions.map((r) => r.code));
    expect(data.airports.filter((a) => !countries.has(a.iso_country) || !regions.has(a.iso_region))).toEqual(
      [],
    );
    expect(data.regions.filter((r) => !countries.has(r.iso_country))).toEqual([]);
  });

  it("types the fields and turns empty text into null", () => {
    const akl = data.airports.find((a) => a.iata_code === "AKL");
    expect(akl).toMatchObject({
      ident: "NZAA",
      type: "large_airport",
      name: "Auckland International Airport",
      iso_country: "NZ",
      municipality: "Auckland",
      scheduled_service: true,
    });
    expect(typeof akl?.latitude).toBe("number");
    expect(akl?.latitude).toBeCloseTo(-37.0, 0);
    expect(data.airports.every((a) => Number.isFinite(a.latitude) && Number.isFinite(a.longitude))).toBe(
      true,
    );
    expect(data.airports.some((a) => a.iata_code === null)).toBe(true);
    expect(data.airports.some((a) => a.elevation_ft === null)).toBe(true);
  });
});
