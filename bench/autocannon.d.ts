declare module 'autocannon' {
  interface Histogram { average: number; mean: number; p50: number; p90: number; p99: number; max: number; total: number }
  interface Result { requests: Histogram; latency: Histogram; errors: number; non2xx: number; timeouts: number; duration: number; '2xx': number }
  interface Options { url: string; socketPath?: string; connections?: number; duration?: number; pipelining?: number; method?: string; headers?: Record<string, string>; tlsOptions?: Record<string, unknown> }
  function autocannon(opts: Options): Promise<Result>;
  export default autocannon;
}
