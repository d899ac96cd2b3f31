//! Tests of the litmus parser.
