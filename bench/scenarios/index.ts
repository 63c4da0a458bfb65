import type { Scenario } from "../lib/types.js";
import { apiScale } from "./api-scale.js";
import { backpressure } from "./backpressure.js";
import { churnFootprint } from "./churn.js";
import { density } from "./density.js";
import { egressPolicy } from "./egress-policy.js";
import { footprint } from "./footprint.js";
import { imagePull } from "./image-pull.js";
import { listing } from "./listing.js";
import { load } from "./load.js";
import { roundtrip } from "./roundtrip.js";
import { sdkDownload } from "./sdk-download.js";
import { sandboxCreate } from "./sandbox-create.js";
import { sandboxPaths } from "./sandbox-paths.js";
import { snapshots } from "./snapshots.js";
import { templateBuild } from "./template-build.js";
import { throughput } from "./throughput.js";
import { transfer } from "./transfer.js";
import { watching } from "./watching.js";

/** Every scenario, in the order they were added. */
export const scenarios: Scenario[] = [roundtrip, throughput, transfer, listing, watching, footprint, load, backpressure, sdkDownload, sandboxCreate, egressPolicy, templateBuild, density, sandboxPaths, imagePull, snapshots, apiScale, churnFootprint];
