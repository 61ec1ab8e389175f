fn main() {
    berth_build::kernels()
}
