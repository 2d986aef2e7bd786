import { sql, type RawBuilder } from 'kysely';

/**
 * A CTE of one statement, its name carried by its type. When a feature's part of another feature's
 * statement reads one of that statement's CTEs, it takes the CTE as a parameter of this type and the
 * statement's owner passes the one it defines: renaming it is a type error, not a run-time SQL error.
 */
export interface Cte<Name extends string> {
  readonly name: Name;
  /** The CTE's name as an identifier, for its definition (`with ${c.ref} as (…)`) and its readers' `from`. */
  readonly ref: RawBuilder<unknown>;
}

export function cte<Name extends string>(name: Name): Cte<Name> {
  return { name, ref: sql.table(name) };
}
