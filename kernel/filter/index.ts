export { parseFilter, FilterSyntaxError, type FilterExpr } from './parse.js';
export { matchesFilter } from './evaluate.js';
