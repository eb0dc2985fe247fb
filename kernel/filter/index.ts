export { parseFilter, FilterSyntaxError, type FilterExpr } from './parse.js';
export { matchesFilter, compileFilter, type CompiledFilter } from './evaluate.js';
