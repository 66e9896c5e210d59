/**
 * A provider's listing as it sets it (`PUT /api/providers/:id/listing`), validated against hostile input: every
 * text and list is bounded, so one listing cannot make the catalog's answers or its search index large.
 */

export const LISTING_LIMITS = {
  nameChars: 100,
  descriptionChars: 2000,
  tags: 10,
  tagChars: 32,
  /** Tables a listing may show and describe; also the most tables read from a provider's database. */
  tables: 200,
  /** Columns of a table read from a provider's database and shown; the rest are left out. */
  columnsPerTable: 100,
  tableDescriptionChars: 1000,
  columnDescriptionChars: 500,
} as const;

const TAG = /^[a-z0-9][a-z0-9-]*$/;

export class ListingError extends Error {
  override name = "ListingError";
}

/** What a provider writes about one of its tables. */
export interface TableNotes {
  description?: string;
  columns?: Record<string, string>;
}

export interface ListingSettings {
  listed: boolean;
  name: string;
  description: string;
  tags: string[];
  /** Keyed by the table's name as the provider wrote it (`airports`, `public.airports`). */
  tableDescriptions: Record<string, TableNotes>;
  /** null: every table the provider's role can read. */
  shownTables: string[] | null;
}

/** The body of `PUT /api/providers/:id/listing`, before validation. */
export interface ListingBody {
  listed?: boolean;
  name?: string;
  description?: string;
  tags?: string[];
  tableDescriptions?: Record<string, TableNotes>;
  shownTables?: string[] | null;
}

/** C0 controls but tab and line breaks, and DEL. */
function isControlCharacter(char: string): boolean {
  const code = char.charCodeAt(0);
  return (code < 0x20 && char !== "\t" && char !== "\n" && char !== "\r") || code === 0x7f;
}

function text(value: string | undefined, field: string, max: number): string {
  const trimmed = (value ?? "").trim();
  if (trimmed.length > max) throw new ListingError(`${field} must be at most ${max} characters`);
  // Control characters (NUL among them) are refused rather than stored and shown to agents.
  if ([...trimmed].some(isControlCharacter))
    throw new ListingError(`${field} must not contain control characters`);
  return trimmed;
}

/**
 * The listing a body asks for; `defaultName` (the provider's registered name) when it names none. Throws
 * {@link ListingError} with what is wrong. Table names are checked against the provider's tables later.
 */
export function parseListing(body: ListingBody, defaultName: string): ListingSettings {
  const name = text(body.name, "name", LISTING_LIMITS.nameChars) || defaultName;
  const description = text(body.description, "description", LISTING_LIMITS.descriptionChars);
  const tags = body.tags ?? [];
  if (tags.length > LISTING_LIMITS.tags) throw new ListingError(`at most ${LISTING_LIMITS.tags} tags`);
  const normalisedTags = [...new Set(tags.map((tag) => tag.trim().toLowerCase()))];
  for (const tag of normalisedTags)
    if (tag.length > LISTING_LIMITS.tagChars || !TAG.test(tag))
      throw new ListingError(
        `tag "${tag.slice(0, 40)}" must be 1 to ${LISTING_LIMITS.tagChars} lowercase letters, digits or "-", starting with a letter or digit`,
      );
  const tableDescriptions: Record<string, TableNotes> = {};
  const described = Object.entries(body.tableDescriptions ?? {});
  if (described.length > LISTING_LIMITS.tables)
    throw new ListingError(`tableDescriptions may describe at most ${LISTING_LIMITS.tables} tables`);
  for (const [table, notes] of described) {
    const columns = Object.entries(notes.columns ?? {});
    if (columns.length > LISTING_LIMITS.columnsPerTable)
      throw new ListingError(
        `tableDescriptions.${table}.columns may describe at most ${LISTING_LIMITS.columnsPerTable} columns`,
      );
    for (const [column] of columns)
      if (column.length === 0 || column.length > 63)
        throw new ListingError(
          `tableDescriptions.${table}.columns: "${column.slice(0, 70)}" is not a column name`,
        );
    tableDescriptions[table] = {
      description: text(
        notes.description,
        `tableDescriptions.${table}.description`,
        LISTING_LIMITS.tableDescriptionChars,
      ),
      columns: Object.fromEntries(
        columns.map(([column, note]) => [
          column,
          text(note, `tableDescriptions.${table}.columns.${column}`, LISTING_LIMITS.columnDescriptionChars),
        ]),
      ),
    };
  }
  const shownTables = body.shownTables ?? null;
  if (shownTables && shownTables.length > LISTING_LIMITS.tables)
    throw new ListingError(`shownTables may name at most ${LISTING_LIMITS.tables} tables`);
  return {
    listed: body.listed ?? false,
    name,
    description,
    tags: normalisedTags,
    tableDescriptions,
    shownTables: shownTables ? [...new Set(shownTables)] : null,
  };
}
